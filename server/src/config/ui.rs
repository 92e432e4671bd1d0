//! `[ui]`: the dashboard's default language and time zone (issue 28, item 7), checked at load
//! with each refusal naming its key.

use dyeline_ui::{Lang, TimeZoneSetting, UiSettings};
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[ui]` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// The pages' language when the reader chose none and `Accept-Language` names neither
    /// supported language: `"zh-CN"` or `"en"`. None: English.
    pub default_language: Option<String>,
    /// The zone the pages show times in unless the reader chooses another: `"UTC"`,
    /// `"browser"` (the reader's browser's zone; the page says when it is not known yet) or an
    /// IANA name such as `"Asia/Shanghai"`. Default `"UTC"`.
    pub time_zone: String,
}

impl Default for UiConfig {
    fn default() -> Self {
        Self {
            default_language: None,
            time_zone: "UTC".into(),
        }
    }
}

impl UiConfig {
    /// The dashboard's settings, or the first bad value with its key.
    pub fn settings(&self) -> Result<UiSettings, ConfigError> {
        let default_language = self
            .default_language
            .as_deref()
            .map(|l| l.parse::<Lang>())
            .transpose()
            .map_err(|e| ConfigError::Invalid(format!("ui.default_language: {e}")))?;
        let time_zone = self
            .time_zone
            .parse::<TimeZoneSetting>()
            .map_err(|e| ConfigError::Invalid(format!("ui.time_zone: {e}")))?;
        Ok(UiSettings {
            default_language,
            time_zone,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    /// `[ui]` lines loaded from a TOML file (not the environment, which tests running beside
    /// this one read).
    fn load(lines: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("dyeline.toml");
        std::fs::write(&file, format!("[ui]\n{lines}\n")).unwrap();
        Config::load(Some(&file), figment::Figment::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn bad_ui_settings_are_refused_naming_the_key() {
        let e = load("time_zone = \"Mars/Base\"").unwrap_err();
        assert!(e.contains("ui.time_zone") && e.contains("Mars/Base"), "{e}");
        let e = load("default_language = \"xx\"").unwrap_err();
        assert!(
            e.contains("ui.default_language") && e.contains("\"xx\""),
            "{e}"
        );
        let c = load("time_zone = \"Asia/Shanghai\"\ndefault_language = \"zh-CN\"").unwrap();
        let s = c.ui.settings().unwrap();
        assert_eq!(s.time_zone.to_string(), "Asia/Shanghai");
        assert_eq!(s.default_language, Some(dyeline_ui::Lang::ZhCn));
        assert_eq!(
            load("time_zone = \"browser\"").unwrap().ui.time_zone,
            "browser"
        );
    }

    /// The README's "Language and time zone" example loads as it says.
    #[test]
    fn the_readme_ui_example_loads() {
        let readme = include_str!("../../../README.md");
        let section = &readme[readme.find("### Language and time zone").unwrap()..];
        let start = section.find("```toml\n[ui]\n").unwrap() + "```toml\n[ui]\n".len();
        let len = section[start..].find("```").unwrap();
        let c = load(&section[start..start + len]).unwrap();
        let s = c.ui.settings().unwrap();
        assert_eq!(s.default_language, Some(dyeline_ui::Lang::ZhCn));
        assert_eq!(s.time_zone.to_string(), "Asia/Shanghai");
    }
}

//! The reader's language and time zone (issue 28, item 7): which of English and Simplified
//! Chinese a page is written in, and in which zone it shows times.
//!
//! Owns: [`Lang`] (from the `dyeline_lang` cookie, else `Accept-Language`, else
//! `[ui] default_language`, else English), [`TimeZoneSetting`] (`[ui] time_zone` and the
//! `dyeline_tz` cookie: `UTC`, `browser` or an IANA name), [`Zone`] (the zone a page is shown
//! in, with the clock and timestamp formats of the pages) and [`UiSettings`]. The strings
//! themselves are in `ui/locales/ui.yml`, read with `rust-i18n`'s `t!` and the request's
//! locale (never the process-wide one, so two readers never see each other's language).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

/// The per-reader language cookie (`zh-CN` or `en`).
pub const LANG_COOKIE: &str = "dyeline_lang";
/// The per-reader time zone choice cookie (`UTC`, `browser` or an IANA name).
pub const TZ_COOKIE: &str = "dyeline_tz";
/// The browser's own zone, written by `live.js` while the choice is `browser`.
pub const BROWSER_TZ_COOKIE: &str = "dyeline_browser_tz";

/// A language of the dashboard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lang {
    /// English.
    #[default]
    En,
    /// Simplified Chinese.
    ZhCn,
}

impl Lang {
    /// The BCP 47 tag: `<html lang>`, the cookie value and the catalog's locale.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// Both languages, in the selector's order.
    pub const ALL: [Lang; 2] = [Lang::ZhCn, Lang::En];

    /// The language's name in itself, for the selector.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhCn => "简体中文",
        }
    }

    /// The language a request's `Accept-Language` asks for: the supported one with the highest
    /// q-value (earlier first on a tie). Any `zh` tag (`zh`, `zh-CN`, `zh-Hans*`, and also
    /// `zh-TW` / `zh-HK` / `zh-Hant`, whose readers read Simplified Chinese better than
    /// English) is [`Lang::ZhCn`]; any `en` tag is [`Lang::En`]. `None` when the header names
    /// neither (other languages only, `*`, or garbage): the configured default then applies.
    pub fn from_accept_language(header: &str) -> Option<Lang> {
        let mut best: Option<(f32, Lang)> = None;
        for item in header.split(',') {
            let mut parts = item.split(';');
            let tag = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0f32;
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    // A malformed q-value makes the entry unusable rather than preferred.
                    q = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|q| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                }
            }
            let primary = tag.split(['-', '_']).next().unwrap_or("");
            let lang = match primary {
                "zh" => Lang::ZhCn,
                "en" => Lang::En,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
                best = Some((q, lang));
            }
        }
        best.map(|(_, l)| l)
    }
}

impl FromStr for Lang {
    type Err = String;

    /// `zh-CN` or `en` (case-insensitive), the values of the cookie and of
    /// `[ui] default_language`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "zh-cn" => Ok(Lang::ZhCn),
            "en" => Ok(Lang::En),
            _ => Err(format!("{s:?} is not a dashboard language: zh-CN or en")),
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// `[ui] time_zone` and the `dyeline_tz` cookie: UTC, the reader's browser's zone, or a zone
/// of the IANA database (bundled in the binary by `chrono-tz`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeZoneSetting {
    /// UTC.
    #[default]
    Utc,
    /// The zone the reader's browser reports (needs JavaScript once).
    Browser,
    /// A named zone, e.g. `Asia/Shanghai`.
    Named(Tz),
}

impl FromStr for TimeZoneSetting {
    type Err = String;

    /// `UTC`, `browser` (case-insensitive) or an IANA name (exact, e.g. `Asia/Shanghai`).
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("utc") {
            Ok(Self::Utc)
        } else if s.eq_ignore_ascii_case("browser") {
            Ok(Self::Browser)
        } else {
            s.parse::<Tz>().map(Self::Named).map_err(|_| {
                format!("{s:?} is not a time zone: \"UTC\", \"browser\" or an IANA name such as \"Asia/Shanghai\"")
            })
        }
    }
}

impl fmt::Display for TimeZoneSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Utc => f.write_str("UTC"),
            Self::Browser => f.write_str("browser"),
            Self::Named(tz) => f.write_str(tz.name()),
        }
    }
}

/// The dashboard's settings of `[ui]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UiSettings {
    /// The language when neither the cookie nor `Accept-Language` names one (else English).
    pub default_language: Option<Lang>,
    /// The zone when the reader chose none.
    pub time_zone: TimeZoneSetting,
}

/// Where a page's zone came from, said in its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneSource {
    /// The reader's or the server's setting, applied as it is.
    Setting,
    /// The browser's zone, as `live.js` reported it.
    Browser,
    /// `browser` was asked for but the browser has not reported its zone (JavaScript off, or
    /// the first page): the configured zone (or UTC) is shown instead.
    BrowserUnknown,
}

/// The zone a page shows its times in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone {
    /// The zone (`Tz::UTC` for UTC).
    pub tz: Tz,
    /// Where it came from.
    pub source: ZoneSource,
    /// The reader's choice (what the selector shows as selected).
    pub choice: TimeZoneSetting,
}

impl Default for Zone {
    fn default() -> Self {
        Self::utc()
    }
}

impl Zone {
    /// UTC, as set.
    pub fn utc() -> Self {
        Self {
            tz: Tz::UTC,
            source: ZoneSource::Setting,
            choice: TimeZoneSetting::Utc,
        }
    }

    /// A named zone, as set.
    pub fn named(tz: Tz) -> Self {
        Self {
            tz,
            source: ZoneSource::Setting,
            choice: TimeZoneSetting::Named(tz),
        }
    }

    /// The zone of a request: the reader's `choice` (cookie) if valid, else the server's
    /// `setting`; `browser` resolves to the browser's reported zone (`browser_tz`, a cookie)
    /// and, while that is unknown or invalid, to the setting's named zone or UTC.
    pub fn resolve(
        choice: Option<&str>,
        browser_tz: Option<&str>,
        setting: TimeZoneSetting,
    ) -> Self {
        let choice = choice
            .and_then(|c| c.parse::<TimeZoneSetting>().ok())
            .unwrap_or(setting);
        let fallback = match setting {
            TimeZoneSetting::Named(tz) => tz,
            _ => Tz::UTC,
        };
        let (tz, source) = match choice {
            TimeZoneSetting::Utc => (Tz::UTC, ZoneSource::Setting),
            TimeZoneSetting::Named(tz) => (tz, ZoneSource::Setting),
            TimeZoneSetting::Browser => {
                match browser_tz.and_then(|z| z.trim().parse::<Tz>().ok()) {
                    Some(tz) => (tz, ZoneSource::Browser),
                    None => (fallback, ZoneSource::BrowserUnknown),
                }
            }
        };
        Self { tz, source, choice }
    }

    /// True for UTC (the pages then keep their `Z` timestamps).
    pub fn is_utc(&self) -> bool {
        self.tz == Tz::UTC
    }

    /// The zone's name (`UTC`, `Asia/Shanghai`).
    pub fn name(&self) -> &'static str {
        self.tz.name()
    }

    /// The offset at `t_unix_nano`, `+08:00` (`+00:00` for UTC).
    pub fn offset(&self, t_unix_nano: i64) -> String {
        let secs = self.at(t_unix_nano).offset().fix().local_minus_utc();
        let sign = if secs < 0 { '-' } else { '+' };
        let m = secs.unsigned_abs() / 60;
        format!("{sign}{:02}:{:02}", m / 60, m % 60)
    }

    fn at(&self, t_unix_nano: i64) -> DateTime<Tz> {
        DateTime::from_timestamp_nanos(t_unix_nano).with_timezone(&self.tz)
    }

    /// A clock time `HH:MM:SS` in this zone (the page header names the zone and offset).
    pub fn clock(&self, t_unix_nano: i64) -> String {
        self.at(t_unix_nano).format("%H:%M:%S").to_string()
    }

    /// A clock time with its offset, `14:03:07 +08:00`.
    pub fn clock_offset(&self, t_unix_nano: i64) -> String {
        format!("{} {}", self.clock(t_unix_nano), self.offset(t_unix_nano))
    }

    /// An RFC 3339 timestamp in whole seconds in this zone: `2026-11-30T20:00:00+08:00`, and
    /// `2026-11-30T12:00:00Z` in UTC. What the range inputs show and what they read back.
    pub fn stamp(&self, t_unix_nano: i64) -> String {
        if self.is_utc() {
            return dyeline_model::time::rfc3339_secs(t_unix_nano);
        }
        self.at(t_unix_nano)
            .format("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    }

    /// Unix ns of a time typed without an offset (`2026-11-30T20:00:00`, `2026-11-30 20:00`),
    /// read in this zone; `None` when `text` is not such a time. A time the zone skips (a
    /// daylight-saving gap) is refused; one it repeats is the earlier instant.
    pub fn parse_local(&self, text: &str) -> Option<i64> {
        let text = text.trim();
        let naive = [
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
        ]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())?;
        let local = match self.tz.from_local_datetime(&naive) {
            LocalResult::Single(t) => t,
            LocalResult::Ambiguous(a, _) => a,
            LocalResult::None => return None,
        };
        local.timestamp_nanos_opt()
    }
}

/// The value of cookie `name` in `jar`, percent-decoded (`live.js` encodes the browser's zone).
pub fn cookie_value(jar: &axum_extra::extract::cookie::CookieJar, name: &str) -> Option<String> {
    let raw = jar.get(name)?.value().to_owned();
    percent_encoding::percent_decode_str(&raw)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_honours_q_values_and_maps_every_zh_to_zh_cn() {
        let al = Lang::from_accept_language;
        assert_eq!(al("zh-CN,zh;q=0.9,en;q=0.8"), Some(Lang::ZhCn));
        assert_eq!(al("en-US,en;q=0.9,zh-CN;q=0.8"), Some(Lang::En));
        assert_eq!(
            al("en;q=0.3, zh-Hans-CN;q=0.7"),
            Some(Lang::ZhCn),
            "q beats order"
        );
        assert_eq!(al("zh"), Some(Lang::ZhCn));
        assert_eq!(al("zh-Hans"), Some(Lang::ZhCn));
        assert_eq!(
            al("zh-TW"),
            Some(Lang::ZhCn),
            "documented: Traditional → Simplified"
        );
        assert_eq!(al("fr-FR, zh;q=0.5"), Some(Lang::ZhCn), "first supported");
        assert_eq!(
            al("zh;q=0, en;q=0.1"),
            Some(Lang::En),
            "q=0 is not acceptable"
        );
        assert_eq!(
            al("zh;q=abc, en;q=0.1"),
            Some(Lang::En),
            "a bad q is unusable"
        );
        assert_eq!(al("fr, de"), None, "nothing usable: the default");
        assert_eq!(al("*"), None);
        assert_eq!(al(""), None);
        assert_eq!(al(";;;,,,=\u{1}"), None, "garbage");
    }

    #[test]
    fn languages_parse_from_the_cookie_and_config_values_only() {
        assert_eq!("zh-CN".parse::<Lang>(), Ok(Lang::ZhCn));
        assert_eq!("EN".parse::<Lang>(), Ok(Lang::En));
        assert!("xx".parse::<Lang>().unwrap_err().contains("zh-CN or en"));
        assert!("zh".parse::<Lang>().is_err());
    }

    const T: i64 = 1_764_504_187_000_000_000; // 2025-11-30T12:03:07Z

    #[test]
    fn a_time_in_shanghai_is_utc_plus_eight_and_reads_back_to_the_same_instant() {
        let z = Zone::named("Asia/Shanghai".parse().unwrap());
        assert_eq!(Zone::utc().clock(T), "12:03:07");
        assert_eq!(z.clock(T), "20:03:07");
        assert_eq!(z.clock_offset(T), "20:03:07 +08:00");
        assert_eq!(z.stamp(T), "2025-11-30T20:03:07+08:00");
        assert_eq!(Zone::utc().stamp(T), "2025-11-30T12:03:07Z");
        // Shown with its offset, a stamp parses back to the same instant...
        assert_eq!(dyeline_model::time::parse_time(&z.stamp(T)).unwrap(), T);
        // ...and typed without one, it is read in the zone shown.
        assert_eq!(z.parse_local("2025-11-30T20:03:07"), Some(T));
        assert_eq!(z.parse_local("2025-11-30 20:03:07"), Some(T));
        assert_eq!(Zone::utc().parse_local("2025-11-30 12:03:07"), Some(T));
        assert_eq!(z.parse_local("nonsense"), None);
    }

    #[test]
    fn zones_resolve_from_cookie_then_setting_and_bad_values_are_ignored() {
        let sh: Tz = "Asia/Shanghai".parse().unwrap();
        let set = TimeZoneSetting::Named(sh);
        assert_eq!(Zone::resolve(None, None, set).tz, sh);
        assert_eq!(Zone::resolve(Some("UTC"), None, set).tz, Tz::UTC);
        assert_eq!(
            Zone::resolve(Some("Mars/Base"), None, set).tz,
            sh,
            "ignored"
        );
        let tokyo = Zone::resolve(Some("browser"), Some("Asia/Tokyo"), set);
        assert_eq!(
            (tokyo.name(), tokyo.source),
            ("Asia/Tokyo", ZoneSource::Browser)
        );
        assert_eq!(tokyo.offset(T), "+09:00");
        let unknown = Zone::resolve(Some("browser"), Some("<script>"), set);
        assert_eq!(
            (unknown.tz, unknown.source),
            (sh, ZoneSource::BrowserUnknown)
        );
        let unknown = Zone::resolve(None, None, TimeZoneSetting::Browser);
        assert_eq!(
            (unknown.tz, unknown.source),
            (Tz::UTC, ZoneSource::BrowserUnknown)
        );
        assert_eq!(
            Zone::resolve(
                None,
                None,
                TimeZoneSetting::Named("America/New_York".parse().unwrap())
            )
            .offset(T),
            "-05:00"
        );
    }

    #[test]
    fn time_zone_settings_parse_utc_browser_and_iana_names() {
        assert_eq!("utc".parse(), Ok(TimeZoneSetting::Utc));
        assert_eq!("Browser".parse(), Ok(TimeZoneSetting::Browser));
        assert_eq!(
            "Asia/Shanghai"
                .parse::<TimeZoneSetting>()
                .unwrap()
                .to_string(),
            "Asia/Shanghai"
        );
        let e = "Mars/Base".parse::<TimeZoneSetting>().unwrap_err();
        assert!(e.contains("Mars/Base") && e.contains("IANA"), "{e}");
    }
}

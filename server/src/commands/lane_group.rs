//! `dyeline lane-group …`: a command-line client of the lane group routes (list, show, put,
//! delete; domain §7.1) for release owners and scripts, with `dyeline channel`'s connection
//! options and answers ([`ApiClient`]). `put` sends a group's JSON from a file or stdin as is,
//! so the server's validation speaks; `list` prints a table, the rest the API's JSON.

use std::io::Read;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::Value;

use super::channel::{ApiClient, ClientArgs, joined};

/// The `lane-group` commands.
#[derive(Subcommand, Clone)]
pub enum LaneGroupCommand {
    /// List every lane group.
    List,
    /// Show one lane group.
    Show {
        /// Lane group id.
        id: String,
    },
    /// Create a lane group or wholly replace it, from its JSON: `{"apps": [...],
    /// "entry_apps": [...], "lanes": {"gray": {"fallback": "base"}}, "reverse_fallback":
    /// false}` (an `id`, if given, must be ID).
    Put {
        /// Lane group id.
        id: String,
        /// The group's JSON file; `-` or none: read stdin.
        file: Option<PathBuf>,
    },
    /// Delete a lane group (its apps are then in no group).
    Delete {
        /// Lane group id.
        id: String,
    },
}

/// Runs one command; returns the text to print.
///
/// # Errors
/// The file cannot be read; the server cannot be reached; the API refused the request (its
/// code and message).
pub fn run(args: &ClientArgs, cmd: &LaneGroupCommand) -> Result<String, String> {
    let api = ApiClient::new(args)?;
    let client = &api.http;
    let url = |id: &str| api.url(&format!("lane-groups/{id}"));
    let rb = match cmd {
        LaneGroupCommand::List => client.get(api.url("lane-groups")),
        LaneGroupCommand::Show { id } => client.get(url(id)),
        LaneGroupCommand::Put { id, file } => client
            .put(url(id))
            .header("content-type", "application/json")
            .body(read_body(file.as_ref())?),
        LaneGroupCommand::Delete { id } => client.delete(url(id)),
    };
    let body = api.send(rb)?;
    if matches!(cmd, LaneGroupCommand::List) {
        return Ok(table(&body));
    }
    serde_json::to_string_pretty(&body).map_err(|e| e.to_string())
}

fn read_body(file: Option<&PathBuf>) -> Result<String, String> {
    let mut text = String::new();
    match file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => {
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("stdin: {e}"))?;
        }
    }
    Ok(text)
}

fn table(body: &Value) -> String {
    let rows = body["lane_groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let lanes: Vec<String> = g["lanes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(lane, s)| match s["fallback"].as_str() {
                    Some("none") => format!("{lane}(strict)"),
                    _ => lane.clone(),
                })
                .collect();
            vec![
                g["id"].as_str().unwrap_or("").to_owned(),
                g["version"]
                    .as_u64()
                    .map_or_else(String::new, |v| v.to_string()),
                g["reverse_fallback"].as_bool().unwrap_or(false).to_string(),
                lanes.join(","),
                joined(&g["entry_apps"]),
                joined(&g["apps"]),
            ]
        })
        .collect();
    super::table::plain(
        &["id", "version", "reverse", "lanes", "entry_apps", "apps"],
        rows,
        &[1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_table_shows_strict_lanes_and_entry_apps() {
        let body = serde_json::json!({"lane_groups": [{"id": "mall", "version": 2,
            "apps": ["gateway", "order"], "entry_apps": ["gateway"],
            "lanes": {"gray": {"fallback": "base"}, "gray2": {"fallback": "none"}},
            "reverse_fallback": false}]});
        let t = table(&body);
        let line = t.lines().nth(1).unwrap();
        assert!(line.starts_with("mall"), "{t}");
        for part in ["gray,gray2(strict)", " 2 ", "false", "gateway,order"] {
            assert!(line.contains(part), "{part:?} in {line:?}");
        }
    }

    #[test]
    fn the_list_table_lines_up_chinese_app_names() {
        let body = serde_json::json!({"lane_groups": [
            {"id": "mall", "version": 2, "apps": ["网关", "order"], "entry_apps": ["网关"],
             "lanes": {"gray": {"fallback": "base"}}, "reverse_fallback": false},
            {"id": "商城2", "version": 13, "apps": ["x"], "entry_apps": [],
             "lanes": {"灰度": {"fallback": "none"}}, "reverse_fallback": true}]});
        let t = table(&body);
        let lines: Vec<&str> = t.lines().collect();
        let starts = crate::commands::table::tests::starts;
        let head = starts(lines[0], &["id", "reverse", "lanes", "entry_apps", "apps"]);
        let a = starts(lines[1], &["mall", "false", "gray", "网关", "网关,order"]);
        let b = starts(lines[2], &["商城2", "true", "灰度(strict)", "x"]);
        assert_eq!(a, head, "{t}");
        assert_eq!(b[..3], head[..3], "{t}");
        assert_eq!(b[3], head[4], "{t}");
    }
}

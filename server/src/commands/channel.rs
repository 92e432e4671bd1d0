//! `dyeline channel …`: a command-line client of the control API (list, show, put, delete,
//! start, ratio, finish, weights, events) for release owners and scripts. Prints the API's
//! JSON (a table for `list`); an API error prints its code and message and exits non-zero.
//! Owns the connection options and the request/answer handling ([`ApiClient`]) that
//! `dyeline lane-group` shares.

use std::time::Duration;

use clap::Subcommand;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};

/// Connection options shared by every `channel` and `lane-group` command.
#[derive(clap::Args, Clone)]
pub struct ClientArgs {
    /// Base URL of the API.
    #[arg(long, env = "DYELINE_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Bearer token for writes (and reads when the server requires it).
    #[arg(long, env = "DYELINE_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Write only if the channel (lane group) is at this version (sent as
    /// `If-Match: "<version>"`).
    #[arg(long)]
    pub if_match: Option<u64>,
}

/// The `channel` commands.
#[derive(Subcommand, Clone)]
pub enum ChannelCommand {
    /// List every channel.
    List,
    /// Show one channel.
    Show {
        /// Channel id.
        id: String,
    },
    /// Create a channel or set its apps (while idle).
    Put {
        /// Channel id.
        id: String,
        /// App names, comma-separated or repeated.
        #[arg(long, value_delimiter = ',', num_args = 0..)]
        apps: Vec<String>,
    },
    /// Delete an idle channel.
    Delete {
        /// Channel id.
        id: String,
    },
    /// Start releasing (blue_percent 50).
    Start {
        /// Channel id.
        id: String,
    },
    /// Set blue_percent (0..=100) while releasing.
    Ratio {
        /// Channel id.
        id: String,
        /// Share of traffic to blue, an integer 0..=100.
        blue_percent: String,
        /// Go ahead although the spike guard refuses (a one-sided error spike fires on the
        /// colour that would gain traffic); recorded with your token's name.
        #[arg(long)]
        force: bool,
        /// A note recorded with the operation.
        #[arg(long)]
        note: Option<String>,
    },
    /// Finish releasing (blue_percent back to 50).
    Finish {
        /// Channel id.
        id: String,
        /// Go ahead although the spike guard refuses; recorded.
        #[arg(long)]
        force: bool,
        /// A note recorded with the operation.
        #[arg(long)]
        note: Option<String>,
    },
    /// Instance weights for the channel's blue_percent.
    Weights {
        /// Channel id.
        id: String,
        /// Blue instance count (count-aware weights with --green-instances).
        #[arg(long)]
        blue_instances: Option<u32>,
        /// Green instance count.
        #[arg(long)]
        green_instances: Option<u32>,
        /// Instance id: also print its apply delay.
        #[arg(long)]
        instance: Option<String>,
    },
    /// The channel's event stream so far.
    Events {
        /// Channel id.
        id: String,
        /// Only after this sequence number.
        #[arg(long)]
        after: Option<u64>,
    },
}

/// A client of the API at `--server`, sending `--token` and `--if-match` with each request.
pub struct ApiClient<'a> {
    /// The HTTP client.
    pub http: Client,
    base: &'a str,
    args: &'a ClientArgs,
}

impl<'a> ApiClient<'a> {
    /// A client for `args`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(args: &'a ClientArgs) -> Result<Self, String> {
        let http = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(ApiClient {
            http,
            base: args.server.trim_end_matches('/'),
            args,
        })
    }

    /// The URL of `/api/v1/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1/{path}", self.base)
    }

    /// Sends `rb` with the token and `If-Match`; the answer's JSON.
    ///
    /// # Errors
    /// The server cannot be reached or answers something other than JSON; the API refused
    /// the request: `<status> <code>: <message>`.
    pub fn send(&self, rb: RequestBuilder) -> Result<Value, String> {
        let rb = match &self.args.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        };
        let rb = match self.args.if_match {
            Some(v) => rb.header("If-Match", format!("\"{v}\"")),
            None => rb,
        };
        let resp = rb
            .send()
            .map_err(|e| format!("cannot reach {}: {e}", self.base))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .map_err(|e| format!("{status}: the answer is not JSON: {e}"))?;
        if !status.is_success() {
            let code = body["error"]["code"].as_str().unwrap_or("error");
            let message = body["error"]["message"].as_str().unwrap_or("");
            return Err(format!("{} {code}: {message}", status.as_u16()));
        }
        Ok(body)
    }
}

/// Runs one command; returns the text to print.
///
/// # Errors
/// The server cannot be reached; the API refused the request (its code and message).
pub fn run(args: &ClientArgs, cmd: &ChannelCommand) -> Result<String, String> {
    let api = ApiClient::new(args)?;
    let client = &api.http;
    let url = |path: String| api.url(&path);
    let rb = match cmd {
        ChannelCommand::List => client.get(url("channels".into())),
        ChannelCommand::Show { id } => client.get(url(format!("channels/{id}"))),
        ChannelCommand::Put { id, apps } => client
            .put(url(format!("channels/{id}")))
            .json(&json!({ "apps": apps })),
        ChannelCommand::Delete { id } => client.delete(url(format!("channels/{id}"))),
        ChannelCommand::Start { id } => client.post(url(format!("channels/{id}/start"))),
        ChannelCommand::Finish { id, force, note } => {
            let rb = client.post(url(format!("channels/{id}/finish")));
            if *force || note.is_some() {
                rb.json(&json!({ "force": force, "note": note }))
            } else {
                rb
            }
        }
        ChannelCommand::Ratio {
            id,
            blue_percent,
            force,
            note,
        } => {
            // Sent as a JSON number when it is one, so the server's validation speaks.
            let value: Value = serde_json::from_str(blue_percent)
                .unwrap_or_else(|_| Value::String(blue_percent.clone()));
            client
                .post(url(format!("channels/{id}/ratio")))
                .json(&json!({ "blue_percent": value, "force": force, "note": note }))
        }
        ChannelCommand::Weights {
            id,
            blue_instances,
            green_instances,
            instance,
        } => {
            let mut q: Vec<(&str, String)> = Vec::new();
            if let Some(b) = blue_instances {
                q.push(("blue_instances", b.to_string()));
            }
            if let Some(g) = green_instances {
                q.push(("green_instances", g.to_string()));
            }
            if let Some(i) = instance {
                q.push(("instance", i.clone()));
            }
            client.get(with_query(&url(format!("channels/{id}/weights")), &q)?)
        }
        ChannelCommand::Events { id, after } => {
            let q: Vec<(&str, String)> = after.iter().map(|a| ("after", a.to_string())).collect();
            client.get(with_query(&url(format!("channels/{id}/events")), &q)?)
        }
    };
    let body = api.send(rb)?;
    if matches!(cmd, ChannelCommand::List) {
        return Ok(table(&body));
    }
    serde_json::to_string_pretty(&body).map_err(|e| e.to_string())
}

fn with_query(url: &str, q: &[(&str, String)]) -> Result<reqwest::Url, String> {
    reqwest::Url::parse_with_params(url, q).map_err(|e| format!("{url}: {e}"))
}

/// The strings of a JSON array, comma-separated (`""` for anything else).
pub fn joined(list: &Value) -> String {
    let items: Vec<&str> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    items.join(",")
}

fn table(body: &Value) -> String {
    let num = |v: &Value| v.as_u64().map_or_else(String::new, |v| v.to_string());
    let rows = body["channels"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let apps = if c["id"] == "global" {
                "(every app not in a releasing local channel)".to_owned()
            } else {
                joined(&c["apps"])
            };
            vec![
                c["id"].as_str().unwrap_or("").to_owned(),
                c["state"].as_str().unwrap_or("").to_owned(),
                num(&c["blue_percent"]),
                num(&c["version"]),
                apps,
            ]
        })
        .collect();
    super::table::plain(
        &["id", "state", "blue_percent", "version", "apps"],
        rows,
        &[2, 3],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_table_lines_up_chinese_channel_and_app_names() {
        let body = serde_json::json!({"channels": [
            {"id": "global", "state": "idle", "blue_percent": 100, "version": 1, "apps": []},
            {"id": "支付", "state": "releasing", "blue_percent": 5, "version": 12,
             "apps": ["订单服务", "cart"]},
            {"id": "trade", "state": "idle", "blue_percent": 100, "version": 3,
             "apps": ["order"]}]});
        let t = table(&body);
        let lines: Vec<&str> = t.lines().collect();
        let starts = crate::commands::table::tests::starts;
        let head = starts(lines[0], &["id", "state", "apps"]);
        for (line, cells) in lines[1..].iter().zip([
            ["global", "idle", "(every app"],
            ["支付", "releasing", "订单服务,cart"],
            ["trade", "idle", "order"],
        ]) {
            assert_eq!(starts(line, &cells), head, "{t}");
        }
        assert!(lines[2].starts_with("支付"), "{t}");
    }
}

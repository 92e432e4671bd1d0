//! Headless Chromium for the dashboard's browser tests, driven over WebDriver (chromedriver +
//! fantoccini), and the same pages read without JavaScript (plain HTTP, server-rendered HTML).
//! Every page shot is written as a PNG to `target/e2e-screenshots/` (or
//! `$E2E_SCREENSHOT_DIR`).
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); `$CHROMIUM` and
//! `$CHROMEDRIVER` override the paths.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::support::{Server, workspace_root};

pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn screenshot_dir() -> PathBuf {
    let dir = std::env::var_os("E2E_SCREENSHOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/e2e-screenshots"));
    std::fs::create_dir_all(&dir).expect("create the screenshot folder");
    dir
}

/// Headless Chromium behind its own chromedriver; both end when this drops (also on panic).
pub(crate) struct Browser {
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    pub(crate) base: String,
    test: &'static str,
    shots: u32,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a fresh Chromium session; `base` is
    /// the dashboard's `http://host:port`.
    pub(crate) fn start(test: &'static str, base: String) -> Self {
        Self::start_with(test, base, None, None)
    }

    /// As [`Browser::start`], asking for `lang` (`Accept-Language` and the UI language) and
    /// running in time zone `tz` (chromedriver's and so Chromium's `TZ`).
    pub(crate) fn start_with(
        test: &'static str,
        base: String,
        lang: Option<&str>,
        tz: Option<&str>,
    ) -> Self {
        let profile = tempfile::Builder::new()
            .prefix("dyeline-chromium-")
            .tempdir()
            .unwrap();
        // This test's screenshots of an earlier run go; the new ones replace them.
        if let Ok(dir) = std::fs::read_dir(screenshot_dir()) {
            for e in dir.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{test}-"))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let port = free_port();
        let mut driver =
            Command::new(std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into()));
        if let Some(tz) = tz {
            driver.env("TZ", tz);
        }
        let driver = driver
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so the Chromium it starts can be ended with it.
            .process_group(0)
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut b = Browser {
            rt,
            client: None,
            driver,
            base,
            test,
            shots: 0,
            _profile: profile,
        };
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + WAIT;
        while reqwest::blocking::get(format!("{url}/status"))
            .ok()
            .filter(|r| r.status().is_success())
            .is_none()
        {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut caps = serde_json::Map::new();
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--no-first-run".into(),
            "--disable-sync".into(),
            "--disable-quic".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", b._profile.path().display()),
        ];
        let mut prefs = serde_json::Map::new();
        if let Some(lang) = lang {
            args.push(format!("--lang={lang}"));
            args.push(format!("--accept-lang={lang}"));
            prefs.insert("intl.accept_languages".into(), json!(lang));
        }
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "args": args,
                "prefs": prefs,
            }),
        );
        let client = b.rt.block_on(async {
            let mut builder =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
            builder.capabilities(caps);
            builder.connect(&url).await
        });
        b.client = Some(client.expect("a Chromium session"));
        b
    }

    pub(crate) fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Opens `path` of the dashboard.
    pub(crate) fn goto(&self, path: &str) {
        let url = self.url(path);
        self.rt
            .block_on(self.c().goto(&url))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Waits for an element matching `css`.
    pub(crate) fn wait_for(&self, css: &str) {
        self.rt
            .block_on(self.c().wait().at_most(WAIT).for_element(Locator::Css(css)))
            .unwrap_or_else(|e| panic!("no {css} on {}: {e}", self.current_url()));
    }

    /// Clicks the element matching `css`; retried while live refresh swaps the page's
    /// `<main>` under it (a stale element).
    pub(crate) fn click(&self, css: &str) {
        let mut last = None;
        for _ in 0..10 {
            let r = self.rt.block_on(async {
                let el = self.c().find(Locator::Css(css)).await?;
                el.click().await
            });
            match r {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("click {css} on {}: {last:?}", self.current_url());
    }

    /// Clicks `css`, which loads another page, then waits for that page to hold `next`.
    pub(crate) fn click_to(&self, css: &str, next: &str) {
        // A mark on the old document (live refresh swaps only <main>, so it stays until the
        // navigation replaces the whole document).
        self.js("document.documentElement.dataset.e2eOld = '1';", vec![]);
        self.click(css);
        let deadline = Instant::now() + WAIT;
        loop {
            let ready = self.rt.block_on(self.c().execute(
                "return document.readyState === 'complete' \
                   && document.documentElement.dataset.e2eOld === undefined \
                   && document.querySelector(arguments[0]) !== null;",
                vec![json!(next)],
            ));
            // Errors while the old page unloads are expected; try again.
            if ready.is_ok_and(|v| v == json!(true)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "after clicking {css}: no new page with {next} (at {})",
                self.current_url()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `text` into the (cleared) field matching `css`.
    pub(crate) fn type_into(&self, css: &str, text: &str) {
        self.rt
            .block_on(async {
                let el = self.c().find(Locator::Css(css)).await?;
                el.clear().await?;
                el.send_keys(text).await
            })
            .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    pub(crate) fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.rt
            .block_on(self.c().execute(script, args))
            .unwrap_or_else(|e| panic!("script failed: {e}"))
    }

    /// The whitespace-normalised text of the first element matching `css`.
    pub(crate) fn text(&self, css: &str) -> String {
        let v = self.js(
            "const e = document.querySelector(arguments[0]);\
             return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null;",
            vec![json!(css)],
        );
        v.as_str()
            .unwrap_or_else(|| panic!("no {css} on {}", self.current_url()))
            .to_owned()
    }

    /// True when an element matches `css`.
    pub(crate) fn has(&self, css: &str) -> bool {
        self.js(
            "return document.querySelector(arguments[0]) !== null;",
            vec![json!(css)],
        ) == json!(true)
    }

    /// The cells' texts of every row matching `css` (e.g. `#hops tbody tr`).
    pub(crate) fn rows(&self, css: &str) -> Vec<Vec<String>> {
        let v = self.js(
            "return Array.from(document.querySelectorAll(arguments[0])).map(tr =>\
               Array.from(tr.cells).map(td => td.textContent.replace(/\\s+/g, ' ').trim()));",
            vec![json!(css)],
        );
        serde_json::from_value(v).unwrap()
    }

    /// The HTTP status of the page now shown.
    pub(crate) fn status(&self) -> u64 {
        self.js(
            "return performance.getEntriesByType('navigation')[0].responseStatus;",
            vec![],
        )
        .as_u64()
        .unwrap_or(0)
    }

    pub(crate) fn current_url(&self) -> String {
        self.rt
            .block_on(self.c().current_url())
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Writes a PNG of the whole page as `<test>-<n>-<name>.png`.
    pub(crate) fn shot(&mut self, name: &str) {
        self.shots += 1;
        let height = self
            .js(
                "return Math.ceil(document.documentElement.scrollHeight);",
                vec![],
            )
            .as_u64()
            .unwrap_or(900)
            .clamp(600, 8000) as u32;
        let png = self.rt.block_on(async {
            self.c().set_window_size(1280, height).await?;
            let png = self.c().screenshot().await;
            self.c().set_window_size(1280, 900).await?;
            png
        });
        let png = png.unwrap_or_else(|e| panic!("screenshot: {e}"));
        let path = screenshot_dir().join(format!("{}-{:02}-{name}.png", self.test, self.shots));
        std::fs::write(&path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(10), c.close()).await });
        }
        // chromedriver and any Chromium left behind: the group this test started. The `--`
        // matters: procps-ng 4.0.2 (Debian 12) reads `kill -KILL -21074` as a signal to
        // process group 2 (only the first digit), so a driver pid starting with 1 became
        // `kill(-1, SIGKILL)`: every process the user may signal, the test run included.
        let _ = Command::new("kill")
            .arg("-KILL")
            .arg("--")
            .arg(format!("-{}", self.driver.id()))
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

pub(crate) fn base(s: &Server) -> String {
    format!("http://{}", s.api)
}

/// Plain HTTP GET (no JavaScript) of a JSON answer.
pub(crate) fn get_json(s: &Server, path: &str) -> Value {
    let r = reqwest::blocking::get(format!("{}{path}", base(s))).unwrap();
    let status = r.status();
    let text = r.text().unwrap();
    assert!(status.is_success(), "GET {path}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

pub(crate) fn api_write(s: &Server, token: &str, method: &str, path: &str, body: &str) -> Value {
    let r = reqwest::blocking::Client::new()
        .request(method.parse().unwrap(), format!("{}{path}", base(s)))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .unwrap();
    let status = r.status();
    let text = r.text().unwrap();
    assert!(status.is_success(), "{method} {path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

pub(crate) fn html_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Text of an HTML fragment: tags and comments dropped, entities decoded, whitespace
/// normalised (as `textContent` in the browser, normalised the same way).
pub(crate) fn html_text(fragment: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for ch in fragment.chars() {
        match ch {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    html_unescape(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rows (cells' texts) of the `<tbody>` of the table with `id`, from server-rendered HTML.
pub(crate) fn html_rows(html: &str, id: &str) -> Vec<Vec<String>> {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the HTML"));
    let table = &html[start..];
    let table = &table[..table.find("</table>").expect("table closes")];
    let body = &table[table.find("<tbody").expect("tbody")..];
    body.split("<tr").skip(1).map(row_cells).collect()
}

/// The cells' texts of one row, from the text after its `<tr`.
fn row_cells(tr: &str) -> Vec<String> {
    tr.split("<td")
        .skip(1)
        .map(|td| {
            let td = &td[td.find('>').unwrap() + 1..];
            html_text(&td[..td.find("</td>").unwrap_or(td.len())])
        })
        .collect()
}

/// The span rows of the trace page's waterfall (`tr[data-span-id]`), each a list of its
/// cells' text, from server-rendered HTML (the folded detail rows under them, with tables of
/// their own, are left out).
pub(crate) fn html_span_rows(html: &str) -> Vec<Vec<String>> {
    let start = html
        .find("id=\"waterfall\"")
        .expect("no #waterfall in the HTML");
    let page = &html[start..html.find("</main>").unwrap_or(html.len())];
    page.split("<tr")
        .skip(1)
        .filter(|tr| tr[..tr.find('>').unwrap_or(0)].contains("data-span-id="))
        .map(|tr| row_cells(&tr[..tr.find("</tr>").unwrap_or(tr.len())]))
        .collect()
}

/// The browser's selector of the rows [`html_span_rows`] reads.
pub(crate) const SPAN_ROWS: &str = "table#waterfall > tbody > tr[data-span-id]";

/// The text of the element with `id`, from server-rendered HTML.
pub(crate) fn html_by_id(html: &str, id: &str) -> String {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the HTML"));
    let rest = &html[start..];
    let rest = &rest[rest.find('>').unwrap() + 1..];
    html_text(&rest[..rest.find("</").unwrap()])
}

pub(crate) fn fetch_html(s: &Server, path: &str) -> String {
    let r = reqwest::blocking::get(format!("{}{path}", base(s))).unwrap();
    assert_eq!(r.status().as_u16(), 200, "GET {path}");
    r.text().unwrap()
}

/// Finds the row of `rows` whose cells at the given indexes equal the given values.
pub(crate) fn find_row<'a>(
    rows: &'a [Vec<String>],
    want: &[(usize, &str)],
) -> Option<&'a Vec<String>> {
    rows.iter().find(|r| {
        want.iter()
            .all(|(i, v)| r.get(*i).map(String::as_str) == Some(*v))
    })
}

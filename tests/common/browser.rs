//! A real browser for the tests of the web pages: Debian's headless Chromium driven through
//! chromedriver (`scripts/chromedriver.sh`, started by `scripts/test`) with fantoccini over plain
//! HTTP on loopback (ADR 0013).
//!
//! `Browser::start()` is `None` when chromedriver is not running or Chromium cannot start — a loud
//! skip on a laptop, a failure with `CI=true`, as for every real component. The helpers panic
//! with what they were doing: a WebDriver error in a test is a failed test. Each browser has a
//! fresh profile (no cookies, cache or storage from another test) and its session is ended by
//! `close()`, or on drop — after saving `<test>-failure.png` when the test is panicking.
//!
//! Artifacts (screenshots) go to `$KUBEMEDIC_TEST_ARTIFACTS`, else `target/test-artifacts/`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

/// How long the `wait_*` helpers wait unless told otherwise.
pub const WAIT: Duration = Duration::from_secs(10);

/// Chromium's command line. Headless without a sandbox (tests run as root in a container, where
/// the setuid/user-namespace sandbox is not available) and without a GPU; nothing that talks to
/// Google on its own (so `foreign_requests` and the network stay about the page under test); a
/// fixed window so screenshots compare; shared memory in /tmp, as a container's /dev/shm is
/// small. The profile directory is appended per browser.
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

pub struct Browser {
    client: Option<Client>,
    webdriver: String,
    session: String,
    // Last, so the browser has quit before its profile is removed.
    _profile: tempfile::TempDir,
}

/// What a forged form submission got back (`Browser::submit_raw_form`).
#[derive(Debug, Clone)]
pub struct FormResponse {
    pub status: u16,
    pub url: String,
    pub content_type: String,
    /// The text of the answer: the body's `innerText` for HTML, the raw text otherwise.
    pub text: String,
}

/// Where screenshots and other test artifacts go: `$KUBEMEDIC_TEST_ARTIFACTS`, else
/// `target/test-artifacts/`; created if missing.
pub fn artifacts_dir() -> PathBuf {
    let dir = match std::env::var_os("KUBEMEDIC_TEST_ARTIFACTS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts"),
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `http://host:port` of a URL: what `foreign_requests` compares against.
pub fn origin_of(url: &str) -> String {
    url::Url::parse(url)
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .origin()
        .ascii_serialization()
}

impl Browser {
    /// A headless Chromium session with a fresh profile, or `None` (skipped) when there is no
    /// working chromedriver and this is not CI.
    pub async fn start() -> Option<Self> {
        super::init();
        let webdriver = super::component("KUBEMEDIC_TEST_WEBDRIVER", "Chromium (chromedriver)")?;
        let binary = super::component("KUBEMEDIC_TEST_CHROMIUM", "Chromium (chromedriver)")?;
        let profile = tempfile::Builder::new()
            .prefix("kubemedic-chromium-")
            .tempdir()
            .expect("profile dir");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = json!({
            "browserName": "chrome",
            "pageLoadStrategy": "normal",
            // A page that does not load, or a script that does not return, fails the test in
            // seconds instead of WebDriver's default five minutes.
            "timeouts": {"pageLoad": 30_000, "script": 30_000, "implicit": 0},
            "goog:chromeOptions": {"binary": binary, "args": args},
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("a JSON object literal")
        };
        let connected = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&webdriver)
            .await;
        let client = match connected {
            Ok(c) => c,
            Err(e) => {
                return super::unavailable(
                    "Chromium (chromedriver)",
                    &format!("no session from {webdriver}: {e}"),
                );
            }
        };
        let session = client
            .session_id()
            .await
            .expect("session id")
            .expect("chromedriver names its session");
        Some(Self {
            client: Some(client),
            webdriver,
            session,
            _profile: profile,
        })
    }

    /// The fantoccini client, for what the helpers do not cover.
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    /// Open `url` and wait until it has loaded (WebDriver's normal page-load strategy).
    pub async fn goto(&self, url: &str) {
        self.client()
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
        // Chromium keeps 250 resource timings by default; a page that polls would lose later
        // requests from `foreign_requests`.
        self.execute(
            "if (window.performance && performance.setResourceTimingBufferSize) \
             performance.setResourceTimingBufferSize(1000000);",
            vec![],
        )
        .await;
    }

    pub async fn current_url(&self) -> String {
        self.client()
            .current_url()
            .await
            .expect("current url")
            .to_string()
    }

    /// The first element matching `css`; panics if there is none.
    pub async fn find(&self, css: &str) -> Element {
        self.client()
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("find {css:?}: {e}"))
    }

    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client()
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("find all {css:?}: {e}"))
    }

    pub async fn exists(&self, css: &str) -> bool {
        !self.find_all(css).await.is_empty()
    }

    pub async fn click(&self, css: &str) {
        self.find(css)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css:?}: {e}"));
    }

    /// Replace the value of the input or textarea `css` by typing `value` into it.
    pub async fn fill(&self, css: &str, value: &str) {
        let field = self.find(css).await;
        field
            .clear()
            .await
            .unwrap_or_else(|e| panic!("clear {css:?}: {e}"));
        field
            .send_keys(value)
            .await
            .unwrap_or_else(|e| panic!("type into {css:?}: {e}"));
    }

    /// The rendered text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css)
            .await
            .text()
            .await
            .unwrap_or_else(|e| panic!("text of {css:?}: {e}"))
    }

    /// The rendered text of the whole page.
    pub async fn page_text(&self) -> String {
        self.text("body").await
    }

    /// Run `script` in the page (`arguments[i]` are `args`; `return` gives the result).
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.client()
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Poll `check` every 50 ms until it holds; panic naming `what` after `timeout`. For pages
    /// that change by themselves (live updates).
    pub async fn wait_until<F>(&self, what: &str, timeout: Duration, mut check: F)
    where
        F: AsyncFnMut(&Self) -> bool,
    {
        let deadline = Instant::now() + timeout;
        while !check(self).await {
            if Instant::now() > deadline {
                let shot = self.screenshot(&format!("wait-{}", slug(what))).await;
                panic!(
                    "waited {timeout:?} for {what}; page now at {} (screenshot {})",
                    self.current_url().await,
                    shot.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The first element matching `css` once there is one (within `WAIT`).
    pub async fn wait_for(&self, css: &str) -> Element {
        self.wait_until(&format!("an element {css:?}"), WAIT, async |b| {
            b.exists(css).await
        })
        .await;
        self.find(css).await
    }

    /// The text of `css` once it contains `needle` (within `WAIT`).
    pub async fn wait_for_text(&self, css: &str, needle: &str) -> String {
        self.wait_until(&format!("{needle:?} in {css:?}"), WAIT, async |b| {
            b.try_text(css).await.is_some_and(|t| t.contains(needle))
        })
        .await;
        self.text(css).await
    }

    /// The text of `css`, or `None` if it is not there (or was replaced while being read).
    pub async fn try_text(&self, css: &str) -> Option<String> {
        let el = self.client().find(Locator::Css(css)).await.ok()?;
        el.text().await.ok()
    }

    /// Sign in on the daemon at `base` with `key` through its sign-in form, and wait for the
    /// page the form leads to: a signed-in page (`Ok`, with the role it shows) or the form again
    /// with its error (`Err`, with the message). Clicking the button returns before the browser
    /// has followed the redirect, so a caller that navigated right after clicking could land
    /// before the sign-in did; every browser sign-in goes through here.
    pub async fn sign_in(&self, base: &str, key: &str) -> Result<String, String> {
        self.goto(&format!("{}/login", base.trim_end_matches('/')))
            .await;
        self.fill("#key", key).await;
        self.click("form.login button[type=submit]").await;
        // The sign-in page has neither element; the page the form leads to has one of them.
        self.wait_until("the page after signing in", WAIT, async |b| {
            b.exists("#role").await || b.exists("#login-error").await
        })
        .await;
        match self.try_text("#role").await {
            Some(role) => Ok(role),
            None => Err(self.text("#login-error").await),
        }
    }

    /// Save a PNG of the viewport as `name` (`.png` added if missing) in `artifacts_dir()`;
    /// returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client().screenshot().await.expect("screenshot");
        save_png(name, &png)
    }

    /// Every URL the current page loaded, or points at, that is not from `origin` (scheme, host
    /// and port of a URL): the navigation and resource timings (documents, scripts, styles,
    /// images, fonts, fetch/XHR, EventSource), and every URL in the DOM — `src`, `href`,
    /// `action`, `formaction`, `srcset`, `poster`, `data`, `ping`, inline `style` and readable
    /// stylesheets' `url(...)`/`@import`, `<meta http-equiv=refresh>`. `data:`, `about:`,
    /// `javascript:`, `mailto:` and `tel:` are not requests and are left out. Not seen: frames'
    /// own documents and WebSocket connections (neither is in the top page's timings).
    pub async fn foreign_requests(&self, origin: &str) -> Vec<String> {
        let origin = origin_of(origin);
        let found = self.execute(FOREIGN_REQUESTS_JS, vec![json!(origin)]).await;
        let mut urls: Vec<String> = serde_json::from_value(found).expect("a list of URLs");
        urls.sort();
        urls.dedup();
        urls
    }

    /// Forge a POST from the current page, as another site would: a hidden form with `fields`
    /// (`application/x-www-form-urlencoded`, cookies and `Origin` as the browser sends them for
    /// a cross-site form) submitted to `url`, and the page it led to. The answer must be a page
    /// (any status, not 204 or a download) within `WAIT`. Open the attacking page first — e.g.
    /// `about:blank` (Origin `null`) or a page on another origin.
    pub async fn submit_raw_form(&self, url: &str, fields: &[(&str, &str)]) -> FormResponse {
        let fields: Vec<[&str; 2]> = fields.iter().map(|(k, v)| [*k, *v]).collect();
        self.execute(FORGE_FORM_JS, vec![json!(url), json!(fields)])
            .await;
        let mut answer = None;
        self.wait_until(
            &format!("the answer to a form POST to {url}"),
            WAIT,
            async |b| {
                // While the page navigates the script may fail; that is "not yet".
                answer = b
                    .client()
                    .execute(FORM_ANSWER_JS, vec![])
                    .await
                    .ok()
                    .filter(|v| !v.is_null());
                answer.is_some()
            },
        )
        .await;
        let answer = answer.expect("waited for it");
        FormResponse {
            status: answer["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .expect("status"),
            url: answer["url"].as_str().unwrap_or_default().to_owned(),
            content_type: answer["contentType"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            text: answer["text"].as_str().unwrap_or_default().to_owned(),
        }
    }

    /// End the session (Chromium quits, its profile is removed).
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            client.close().await.expect("end the WebDriver session");
        }
    }
}

impl Drop for Browser {
    /// A browser not `close()`d — a test that panicked or returned early — still ends its session,
    /// on a thread of its own because the test's runtime may be gone. A panicking test leaves
    /// `<test name>-failure.png` behind first. Errors here are ignored: never panic in drop.
    fn drop(&mut self) {
        // Kept until the session is ended here: dropping fantoccini's last client handle makes
        // its own task end the session, which would race the failure screenshot.
        let Some(client) = self.client.take() else {
            return;
        };
        let failure = std::thread::panicking().then(|| {
            let test = std::thread::current()
                .name()
                .map(slug)
                .unwrap_or_else(|| "browser".into());
            format!("{test}-failure")
        });
        let session = format!(
            "{}/session/{}",
            self.webdriver.trim_end_matches('/'),
            self.session
        );
        let ended = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let http = reqwest::Client::new();
                if let Some(name) = failure
                    && let Ok(r) = http.get(format!("{session}/screenshot")).send().await
                    && let Ok(v) = r.json::<Value>().await
                    && let Some(b64) = v["value"].as_str()
                    && let Ok(png) =
                        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64)
                {
                    let path = save_png(&name, &png);
                    eprintln!("browser: screenshot of the failed test: {}", path.display());
                }
                let _ = http
                    .delete(&session)
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await;
            });
        });
        let _ = ended.join();
        drop(client);
    }
}

fn save_png(name: &str, png: &[u8]) -> PathBuf {
    let file = if name.ends_with(".png") {
        name.to_owned()
    } else {
        format!("{name}.png")
    };
    let path = artifacts_dir().join(file);
    std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// A file-name-safe form of a test name or a description.
fn slug(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.chars().take(80).collect()
}

/// `arguments[0]`: the page's allowed origin. Returns the absolute URLs found, unsorted.
const FOREIGN_REQUESTS_JS: &str = r#"
const origin = arguments[0];
const out = new Set();
const notRequests = /^(data|about|javascript|mailto|tel):$/i;
const note = (raw, base) => {
  if (raw == null) return;
  const text = String(raw).trim();
  if (text === '') return;
  let u;
  try { u = new URL(text, base || document.baseURI); } catch (e) { out.add(text); return; }
  if (notRequests.test(u.protocol)) return;
  if (u.origin !== origin) out.add(u.href);
};
const urlsInCss = (css, base) => {
  for (const m of String(css).matchAll(/url\(\s*(['"]?)(.*?)\1\s*\)/g)) note(m[2], base);
};
for (const type of ['navigation', 'resource']) {
  for (const e of performance.getEntriesByType(type)) note(e.name);
}
const single = ['src', 'href', 'action', 'formaction', 'poster', 'data', 'background', 'cite',
  'longdesc', 'manifest', 'xlink:href'];
for (const el of document.querySelectorAll('*')) {
  for (const a of single) note(el.getAttribute(a));
  for (const p of (el.getAttribute('ping') || '').split(/\s+/)) note(p);
  for (const a of ['srcset', 'imagesrcset']) {
    for (const c of (el.getAttribute(a) || '').split(',')) note(c.trim().split(/\s+/)[0]);
  }
  const style = el.getAttribute('style');
  if (style) urlsInCss(style);
  if (el.tagName === 'META' && /refresh/i.test(el.getAttribute('http-equiv') || '')) {
    const m = /url\s*=\s*['"]?([^'";]+)/i.exec(el.getAttribute('content') || '');
    if (m) note(m[1]);
  }
}
for (const sheet of document.styleSheets) {
  let rules;
  try { rules = sheet.cssRules; } catch (e) { continue; }
  const base = sheet.href || document.baseURI;
  for (const r of rules) {
    if (r.href) note(r.href, base);
    urlsInCss(r.cssText, base);
  }
}
return [...out];
"#;

/// `arguments`: the target URL and `[[name, value], ...]`. Marks the current document so the
/// next one (the answer) can be told apart.
const FORGE_FORM_JS: &str = r#"
const [url, fields] = arguments;
document.__kubemedicForged = true;
const form = document.createElement('form');
form.method = 'post';
form.action = url;
form.enctype = 'application/x-www-form-urlencoded';
form.style.display = 'none';
for (const [name, value] of fields) {
  const input = document.createElement('input');
  input.type = 'hidden';
  input.name = name;
  input.value = value;
  form.appendChild(input);
}
(document.body || document.documentElement).appendChild(form);
// Not form.submit(): a field named "submit" would shadow it.
HTMLFormElement.prototype.submit.call(form);
"#;

/// `null` until the forged form's answer has loaded, then what it was.
const FORM_ANSWER_JS: &str = r#"
if (document.__kubemedicForged || document.readyState !== 'complete') return null;
const nav = performance.getEntriesByType('navigation')[0];
const html = (document.contentType || '').startsWith('text/html');
const pre = document.querySelector('pre');
return {
  status: nav ? nav.responseStatus : 0,
  url: location.href,
  contentType: document.contentType || '',
  text: html ? (document.body ? document.body.innerText : '') : (pre ? pre.textContent : document.documentElement.textContent),
};
"#;

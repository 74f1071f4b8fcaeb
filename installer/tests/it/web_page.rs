//! The page `berth-build serve` answers a browser, driven in headless Chromium as a person
//! uses it, from a host of its own: the browser, the server and the node are three network
//! namespaces. The browser's network log and console are read for requests to any other host
//! and for anything the page's Content-Security-Policy refused.

use crate::support;

use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_formats::spec::InstallerSpec;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Emulation, Network, Page};
use headless_chrome::{Browser, LaunchOptions, Tab};
use support::network::{Host, Network as Hosts};
use support::{Containerd, Server, TestDist, text, wait_until};

/// Server-side setup: `berth-build serve` of `dist` on `host`, answering at `http://listen`.
struct Serving {
    listen: String,
    _server: Server,
    _folder: tempfile::TempDir,
}

fn serve(host: &Host, dist: &TestDist) -> Serving {
    let listen = format!("{}:8800", host.address());
    let folder = tempfile::tempdir().unwrap();
    let server = Server::spawn(
        host.command(
            &support::built_beside(env!("CARGO_BIN_EXE_berth"), "berth-build")
                .display()
                .to_string(),
        )
        .args(["serve", "--dist", &dist.url(), "--listen", &listen])
        .arg("--berth")
        .arg(env!("CARGO_BIN_EXE_berth"))
        .arg("--installers")
        .arg(folder.path().join("installers")),
        &folder.path().join("serve.log"),
    );
    let serving = Serving {
        listen,
        _server: server,
        _folder: folder,
    };
    wait_until("the server to answer", Duration::from_secs(30), || {
        curl(host, &[&format!("http://{}/versions.json", serving.listen)])
            .status
            .success()
    });
    serving
}

fn curl(host: &Host, arguments: &[&str]) -> Output {
    host.command("curl")
        .args(["-sS", "--max-time", "10"])
        .args(arguments)
        .output()
        .unwrap()
}

/// Headless Chromium on `host`, with what its tab requested and what its console said.
struct Window {
    _browser: Browser,
    tab: Arc<Tab>,
    requests: Arc<Mutex<Vec<String>>>,
    console: Arc<Mutex<Vec<String>>>,
}

impl Window {
    fn open(host: &Host, url: &str) -> Window {
        let chromium = berth_testkit::require("chromium", "chromium");
        let browser = host.run_inside(|| {
            Browser::new(LaunchOptions {
                path: Some(chromium),
                sandbox: false,
                window_size: Some((1280, 900)),
                // The node installs while the page waits.
                idle_browser_timeout: Duration::from_secs(600),
                ..LaunchOptions::default()
            })
            .expect("headless Chromium starts")
        });
        let tab = browser.new_tab().unwrap();
        tab.set_default_timeout(Duration::from_secs(30));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let console = Arc::new(Mutex::new(Vec::new()));
        let (seen, said) = (Arc::clone(&requests), Arc::clone(&console));
        tab.add_event_listener(Arc::new(move |event: &Event| match event {
            Event::NetworkRequestWillBeSent(sent) => {
                seen.lock().unwrap().push(sent.params.request.url.clone());
            }
            Event::LogEntryAdded(entry) => {
                let entry = &entry.params.entry;
                let url = entry.url.as_deref().unwrap_or_default();
                // The check's answer to a spec it refuses is a 400, logged as a failed load.
                let refused_spec = url.ends_with("/installer/check") && entry.text.contains("400");
                if !refused_spec {
                    said.lock().unwrap().push(format!(
                        "{:?} {:?} {url}: {}",
                        entry.level, entry.source, entry.text
                    ));
                }
            }
            Event::RuntimeExceptionThrown(thrown) => {
                said.lock().unwrap().push(format!(
                    "exception: {}",
                    thrown.params.exception_details.text
                ));
            }
            _ => {}
        }))
        .unwrap();
        let all_defaults = serde_json::json!({});
        tab.call_method(serde_json::from_value::<Network::Enable>(all_defaults).unwrap())
            .unwrap();
        tab.enable_log().unwrap();
        tab.enable_runtime().unwrap();
        tab.navigate_to(url)
            .unwrap()
            .wait_until_navigated()
            .unwrap();
        Window {
            _browser: browser,
            tab,
            requests,
            console,
        }
    }

    fn value(&self, expression: &str) -> serde_json::Value {
        self.tab
            .evaluate(expression, false)
            .unwrap()
            .value
            .unwrap_or(serde_json::Value::Null)
    }

    fn text_of(&self, id: &str) -> String {
        let value = self.value(&format!("document.getElementById('{id}').textContent"));
        value.as_str().unwrap_or_default().to_string()
    }

    fn focused(&self) -> String {
        let value = self.value("document.activeElement ? document.activeElement.id : ''");
        value.as_str().unwrap_or_default().to_string()
    }

    /// Presses Tab until `id` has the focus: the control is reachable by keyboard.
    fn tab_to(&self, id: &str) {
        for _ in 0..40 {
            if self.focused() == id {
                return;
            }
            self.tab.press_key("Tab").unwrap();
        }
        panic!(
            "Tab never reached #{id}; the focus is on #{}",
            self.focused()
        );
    }

    /// Waits until element `id`'s text satisfies `wanted`; returns it.
    fn wait_for_text(&self, id: &str, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let last = self.text_of(id);
            if wanted(&last) {
                return last;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after 30s waiting for {what}; #{id} says: {last:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A screenshot at `width` CSS pixels wide; the PNG's width is checked.
    fn screenshot(&self, width: u32, height: u32) -> Vec<u8> {
        let metrics = serde_json::json!({
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600,
        });
        self.tab
            .call_method(
                serde_json::from_value::<Emulation::SetDeviceMetricsOverride>(metrics).unwrap(),
            )
            .unwrap();
        // Nothing sticks out sideways (a long URL once did, and a phone zoomed the page out).
        let overflow = self.value("document.documentElement.scrollWidth");
        assert!(
            overflow
                .as_u64()
                .is_some_and(|scrolled| scrolled <= u64::from(width)),
            "the page is {overflow} pixels wide at {width}"
        );
        let png = self
            .tab
            .capture_screenshot(Page::CaptureScreenshotFormatOption::Png, None, None, true)
            .unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let png_width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        assert_eq!(png_width, width, "the screenshot is as wide as asked");
        png
    }

    /// Every control of the page has a label, and how long the page took to load (printed).
    fn assert_labelled(&self) {
        let unlabelled = self.value(
            "JSON.stringify([...document.querySelectorAll('input, select, textarea')].filter((control) => control.labels.length === 0).map((control) => control.id))",
        );
        assert_eq!(unlabelled, "[]", "controls without a label");
        let controls = self.value("document.querySelectorAll('input, select, textarea').length");
        assert!(
            controls.as_u64().is_some_and(|count| count > 40),
            "{controls} controls"
        );
        let loaded = self.value(
            "(() => { const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime; })()",
        );
        eprintln!("the page loaded in {loaded} ms");
    }

    /// Every request went to `listen`, and the console holds no error (a refusal by the
    /// page's Content-Security-Policy is one).
    fn assert_kept_to(&self, listen: &str, paths: &[&str]) {
        let requests = self.requests.lock().unwrap().clone();
        let origin = format!("http://{listen}/");
        let elsewhere: Vec<&String> = requests
            .iter()
            .filter(|url| !url.starts_with(&origin))
            .collect();
        assert!(
            elsewhere.is_empty(),
            "requests to other hosts: {elsewhere:?}"
        );
        for path in paths {
            let url = format!("{origin}{}", path.trim_start_matches('/'));
            assert!(
                requests.contains(&url),
                "{url} was not requested: {requests:?}"
            );
        }
        let console = self.console.lock().unwrap().clone();
        let errors: Vec<&String> = console
            .iter()
            .filter(|line| line.starts_with("Error") || line.starts_with("exception"))
            .collect();
        assert!(errors.is_empty(), "the console: {console:?}");
    }
}

/// Where the README shows the page; written when `BERTH_WRITE_DOCS` is set.
fn keep_screenshot(name: &str, png: &[u8]) {
    if std::env::var_os("BERTH_WRITE_DOCS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        fs_err::write(docs.join(name), png).unwrap();
    }
}

/// A host that installs with the command the page printed.
struct Node {
    host: Host,
    containerd: Containerd,
    root: tempfile::TempDir,
}

impl Node {
    fn run(&self, program: &str, arguments: &[&str]) -> Output {
        self.host
            .command(program)
            .args(arguments)
            .env("BERTH_ROOT", self.root.path())
            .env("CONTAINERD_ADDRESS", &self.containerd.socket)
            .output()
            .unwrap()
    }
}

#[test]
fn a_person_composes_an_installer_on_the_page_and_its_command_installs_it() {
    let mut hosts = Hosts::new();
    let (server_host, browser_host, node_host) = (hosts.host(), hosts.host(), hosts.host());
    let (_, dist) = TestDist::examples(&["demo"]);
    let serving = serve(&server_host, &dist);
    let listen = serving.listen.clone();
    let page = Window::open(&browser_host, &format!("http://{listen}/"));

    // With the keyboard alone: the add-on, its version, its port.
    page.tab.wait_for_element("#use-demo").unwrap();
    page.assert_labelled();
    page.tab_to("use-demo");
    page.tab.press_key(" ").unwrap();
    page.tab_to("version-demo");
    for _ in 0..10 {
        if page.value("document.getElementById('version-demo').value") == "2.0.0" {
            break;
        }
        page.tab.press_key("ArrowDown").unwrap();
    }
    assert_eq!(
        page.value("document.getElementById('version-demo').value"),
        "2.0.0"
    );
    page.tab_to("field-demo-port");
    page.tab.type_str("eighty").unwrap();

    // The page's error is the server's own for the YAML it shows.
    // Checked as it is typed: the error that counts is the one for the whole word.
    let error = page.wait_for_text("field-demo-port-error", "the port's error", |text| {
        text.contains("\"eighty\"")
    });
    let yaml = page.text_of("yaml");
    assert!(
        yaml.contains("    version: \"2.0.0\"\n    port: eighty\n"),
        "{yaml}"
    );
    let posted = curl(
        &server_host,
        &[
            "--data-binary",
            &yaml,
            &format!("http://{listen}/installer"),
        ],
    );
    assert_eq!(error, text(&posted.stdout).trim_end(), "{yaml}");
    assert!(
        error.contains("installer.yaml:6: spec.demo.port"),
        "{error}"
    );
    assert_eq!(
        page.value("document.getElementById('create').disabled"),
        true
    );

    // A whole number, out of the range demo declares.
    for _ in "eighty".chars() {
        page.tab.press_key("Backspace").unwrap();
    }
    page.tab.type_str("70000").unwrap();
    let error = page.wait_for_text("field-demo-port-error", "the range's error", |text| {
        text.contains("70000")
    });
    assert!(
        error.starts_with("installer.yaml:6: spec.demo.port is 70000, more than 65535"),
        "{error}"
    );
    let help = page.text_of("field-demo-port-help");
    assert!(
        help.contains("a whole number from 1 to 65535; default 8080"),
        "{help}"
    );
    for _ in "70000".chars() {
        page.tab.press_key("Backspace").unwrap();
    }
    page.tab.type_str("9090").unwrap();
    let status = page.wait_for_text("check-status", "the server's check", |text| {
        text.starts_with("The server checked the spec")
    });
    assert!(status.contains("demo 2.0.0"), "{status}");
    assert_eq!(page.text_of("field-demo-port-error"), "");
    page.tab_to("create");
    page.tab.press_key("Enter").unwrap();
    let command = page.wait_for_text("online-command", "the online command", |text| {
        !text.is_empty()
    });
    let id = page.text_of("result-id");
    assert_eq!(
        command,
        format!("curl -fsSL http://{listen}/{id} | sudo bash")
    );
    assert_eq!(page.focused(), "result-title");
    let bundle = page.value("document.getElementById('bundle-zstd').href");
    assert_eq!(bundle, format!("http://{listen}/bundle/{id}.tar.zst"));
    let spec = curl(
        &server_host,
        &["-f", &format!("http://{listen}/installer/{id}")],
    );
    let yaml = page.text_of("yaml");
    assert!(
        yaml.ends_with("    version: \"2.0.0\"\n    port: 9090\n"),
        "{yaml}"
    );
    assert_eq!(text(&spec.stdout), yaml, "the kept spec is the page's");

    keep_screenshot("web-page-wide.png", &page.screenshot(1280, 1000));
    keep_screenshot("web-page-narrow.png", &page.screenshot(390, 1400));
    page.assert_kept_to(
        &listen,
        &[
            "/",
            "/ui/app.js",
            "/ui/style.css",
            "/addons.json",
            "/installer/check",
            "/installer",
        ],
    );

    // The printed command, run on a node as printed (root needs no sudo).
    let node = Node {
        containerd: Containerd::start_in(&node_host),
        host: node_host,
        root: tempfile::tempdir().unwrap(),
    };
    let output = node.run("bash", &["-c", &command.replacen("sudo ", "", 1)]);
    let printed = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{printed}");
    assert_eq!(
        text(&curl(&node.host, &["http://127.0.0.1:9090/"]).stdout).trim(),
        "demo 2.0.0"
    );
    let status = node.run(env!("CARGO_BIN_EXE_berth"), &["status", "-o", "json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let demo = status["addons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|addon| addon["name"] == "demo")
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(demo["currentVersion"], "2.0.0", "{demo}");
    let available = demo["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|condition| condition["type"] == "Available")
        .unwrap();
    assert_eq!(available["status"], "True", "{demo}");
    let reset = node.run(env!("CARGO_BIN_EXE_berth"), &["reset", "--yes"]);
    assert!(reset.status.success(), "{}", text(&reset.stderr));
}

#[test]
fn a_pasted_spec_fills_the_form_and_makes_the_installer_a_post_of_it_makes() {
    let mut hosts = Hosts::new();
    let (server_host, browser_host) = (hosts.host(), hosts.host());
    let (_, mut dist) = TestDist::examples(&["demo"]);
    // What examples/cluster.yaml asks for, by the versions it names; containerd and registry
    // stand in (packaging the real ones needs their distro's packages): the installer's id and
    // the fields the page offers for them (kURL's) depend on their names and versions alone.
    dist.addon("containerd", "1.6.20", "# stands in for containerd\n");
    dist.addon("registry", "2.8.2", "# stands in for the registry\n");
    let serving = serve(&server_host, &dist);
    let listen = serving.listen.clone();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    let id = InstallerSpec::load(&example).unwrap().id();

    let page = Window::open(&browser_host, &format!("http://{listen}/"));
    page.tab.wait_for_element("#use-demo").unwrap();
    // Pasted (inserted as a paste inserts it), then "Fill the form", by keyboard.
    page.tab.find_element("#paste").unwrap().focus().unwrap();
    page.tab
        .send_character(&fs_err::read_to_string(&example).unwrap())
        .unwrap();
    page.tab_to("load");
    page.tab.press_key("Enter").unwrap();
    let loaded = page.wait_for_text("load-status", "the spec read", |text| {
        text.starts_with("The form holds the spec") || text.starts_with("The server refused")
    });
    assert_eq!(
        loaded,
        format!("The form holds the spec now (installer {id}).")
    );
    assert_eq!(
        page.value("document.getElementById('field-registry-publishPort').value"),
        "5000"
    );
    assert_eq!(
        page.value("document.getElementById('field-containerd-tomlConfig').value"),
        "[debug]\n  level = \"warn\"\n"
    );
    assert_eq!(
        page.value("document.getElementById('installer-name').value"),
        "cluster"
    );
    assert_eq!(create_from_the_form(&page), id, "{}", page.text_of("yaml"));
    // The same file posted as a vendor posts it: the same installer.
    assert_eq!(
        post_file(&server_host, &listen, &example),
        format!("http://{listen}/{id}")
    );

    // Read from a file: kURL's settings sections, with a list, a document and command lines.
    let settings = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(
        settings.path(),
        "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nmetadata: {name: settings}\nspec:\n  demo: {version: latest}\n  kurl:\n    airgap: false\n    additionalNoProxyAddresses: [10.0.0.0/8, .internal]\n    hostPreflights:\n      apiVersion: troubleshoot.sh/v1beta2\n      kind: HostPreflight\n      spec: {collectors: [{cpu: {}}]}\n  selinuxConfig:\n    chconCmds: [[chcon, -t, bin_t, /usr/bin/x]]\n",
    )
    .unwrap();
    let id = InstallerSpec::load(settings.path()).unwrap().id();
    choose_file(&page, settings.path());
    page.wait_for_text("load-status", "the file read", |text| {
        text == format!("The form holds the spec now (installer {id}).")
    });
    assert_eq!(
        page.value(
            "document.getElementById('field-settings-kurl-additionalNoProxyAddresses').value"
        ),
        "10.0.0.0/8\n.internal"
    );
    assert_eq!(create_from_the_form(&page), id, "{}", page.text_of("yaml"));
    assert_eq!(
        post_file(&server_host, &listen, settings.path()),
        format!("http://{listen}/{id}")
    );

    // A file that is not a spec is refused with the server's reason, and the form kept.
    let broken = tempfile::NamedTempFile::new().unwrap();
    fs_err::write(broken.path(), "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: 9.9.9\n").unwrap();
    choose_file(&page, broken.path());
    let refused = page.wait_for_text("load-status", "the refusal", |text| {
        text.starts_with("The server refused")
    });
    assert!(
        refused.contains("installer.yaml:5: demo has no version `9.9.9`"),
        "{refused}"
    );
    assert_eq!(
        page.value("document.getElementById('installer-name').value"),
        "settings"
    );
    page.assert_kept_to(
        &listen,
        &["/", "/addons.json", "/installer/check", "/installer"],
    );
}

/// Waits for the server's check of what the form holds, creates the installer, returns its id.
fn create_from_the_form(page: &Window) -> String {
    page.wait_for_text("check-status", "the server's check", |text| {
        text.starts_with("The server checked the spec")
    });
    page.value("document.getElementById('result-id').textContent = ''");
    page.tab.find_element("#create").unwrap().click().unwrap();
    page.wait_for_text("result-id", "the installer", |text| !text.is_empty())
}

/// Picks `file` in the page's file chooser.
fn choose_file(page: &Window, file: &Path) {
    page.tab
        .find_element("#spec-file")
        .unwrap()
        .set_input_files(&[&file.display().to_string()])
        .unwrap();
    // Set through the DevTools protocol, the files come with no `change` event; a person's
    // choice comes with one.
    page.value("document.getElementById('spec-file').dispatchEvent(new Event('change'))");
}

/// `curl --data-binary @file` to the server's `/installer`, as a vendor posts a spec.
fn post_file(host: &Host, listen: &str, file: &Path) -> String {
    let posted = curl(
        host,
        &[
            "-f",
            "--data-binary",
            &format!("@{}", file.display()),
            &format!("http://{listen}/installer"),
        ],
    );
    assert!(posted.status.success(), "{}", text(&posted.stderr));
    text(&posted.stdout).trim().to_string()
}

//! Go templates, as kURL and troubleshoot use them: kURL renders a host-preflight file with
//! `{{kurl …}}` actions against its context before troubleshoot reads it, and troubleshoot
//! renders an outcome's message with `{{ … }}` against what the collector found.
//!
//! The functions are Go's own plus the part of sprig (which both tools load) that host
//! preflight files use; any other function is a parse error naming it, not an empty string.

use gotmpl::{MissingKey, Template, TemplateError, Value};

/// kURL's action delimiters: `{{kurl .IsUpgrade }}`; troubleshoot's `{{ … }}` pass through.
pub const KURL_LEFT: &str = "{{kurl";
pub const KURL_RIGHT: &str = "}}";

/// Ranges in these files walk host lists; a runaway range is bounded all the same.
const MAX_RANGE_ITERATIONS: u64 = 10_000;

/// `text` with its `{{kurl …}}` actions rendered against `data`. A field the data does not
/// have is an error, as Go reports one for a struct without that field.
pub fn render_kurl(name: &str, text: &str, data: &Value) -> Result<String, TemplateError> {
    let template = with_functions(Template::new(name))
        .delims(KURL_LEFT, KURL_RIGHT)
        .missing_key(MissingKey::Error)
        .max_range_iters(MAX_RANGE_ITERATIONS)
        .parse(text)?;
    render_bounded(&template, data, crate::document::MAX_DOCUMENT_BYTES)
}

/// The most an outcome message may grow to once rendered.
const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Renders `template`, stopping as soon as its output passes `limit` bytes: a few bytes of
/// template can ask for gigabytes, and the bound on a document is checked only after.
fn render_bounded(
    template: &Template,
    data: &Value,
    limit: usize,
) -> Result<String, TemplateError> {
    struct Bounded {
        text: String,
        limit: usize,
        overflowed: bool,
    }
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            if self.text.len() + text.len() > self.limit {
                self.overflowed = true;
                return Err(std::fmt::Error);
            }
            self.text.push_str(text);
            Ok(())
        }
    }
    let mut output = Bounded {
        text: String::new(),
        limit,
        overflowed: false,
    };
    match template.execute_fmt(&mut output, data) {
        Ok(()) => Ok(output.text),
        Err(_) if output.overflowed => Err(TemplateError::Exec(format!(
            "it renders to more than the {limit} bytes allowed"
        ))),
        Err(error) => Err(error),
    }
}

/// An outcome message rendered against the collector's result. Text without `{{` is taken
/// as written, so a message is never lost to a template error.
pub fn render_message(text: &str, data: &Value) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    with_functions(Template::new("message"))
        .max_range_iters(MAX_RANGE_ITERATIONS)
        .parse(text)
        .and_then(|template| render_bounded(&template, data, MAX_MESSAGE_BYTES))
        .unwrap_or_else(|_| text.to_string())
}

fn with_functions(template: Template) -> Template {
    template
        .func("semverCompare", |args| {
            let [constraint, version] = strings::<2>("semverCompare", args)?;
            crate::semver_range::matches(&constraint, &version)
                .map(Value::Bool)
                .map_err(TemplateError::Exec)
        })
        .func("contains", |args| {
            let [needle, haystack] = strings::<2>("contains", args)?;
            Ok(Value::Bool(haystack.contains(&needle)))
        })
        .func("hasPrefix", |args| {
            let [prefix, text] = strings::<2>("hasPrefix", args)?;
            Ok(Value::Bool(text.starts_with(&prefix)))
        })
        .func("hasSuffix", |args| {
            let [suffix, text] = strings::<2>("hasSuffix", args)?;
            Ok(Value::Bool(text.ends_with(&suffix)))
        })
        .func("trimPrefix", |args| {
            let [prefix, text] = strings::<2>("trimPrefix", args)?;
            Ok(string(text.strip_prefix(&prefix).unwrap_or(&text)))
        })
        .func("trimSuffix", |args| {
            let [suffix, text] = strings::<2>("trimSuffix", args)?;
            Ok(string(text.strip_suffix(&suffix).unwrap_or(&text)))
        })
        .func("trim", |args| {
            let [text] = strings::<1>("trim", args)?;
            Ok(string(text.trim()))
        })
        .func("lower", |args| {
            let [text] = strings::<1>("lower", args)?;
            Ok(string(&text.to_lowercase()))
        })
        .func("upper", |args| {
            let [text] = strings::<1>("upper", args)?;
            Ok(string(&text.to_uppercase()))
        })
        .func("replace", |args| {
            let [old, new, text] = strings::<3>("replace", args)?;
            // Each replace can square a text's length: bounded before it is built.
            let count = if old.is_empty() {
                text.chars().count() + 1
            } else {
                text.matches(old.as_str()).count()
            };
            let length = text.len() + count * new.len();
            if length > crate::document::MAX_DOCUMENT_BYTES {
                return Err(TemplateError::Exec(format!(
                    "replace would make a text of {length} bytes, more than a host preflight may be"
                )));
            }
            Ok(string(&text.replace(&old, &new)))
        })
        .func("quote", |args| {
            let [text] = strings::<1>("quote", args)?;
            Ok(string(&format!("{text:?}")))
        })
        .func("toString", |args| {
            let [text] = strings::<1>("toString", args)?;
            Ok(string(&text))
        })
        .func("empty", |args| match args {
            [value] => Ok(Value::Bool(!gotmpl::is_true(value))),
            _ => Err(arity("empty", 1, args.len())),
        })
        .func("default", |args| match args {
            // sprig's `default DEFAULT VALUE`: VALUE unless it is empty.
            [fallback] => Ok(fallback.clone()),
            [fallback, value] if gotmpl::is_true(value) => Ok(value.clone()),
            [fallback, _] => Ok(fallback.clone()),
            _ => Err(arity("default", 2, args.len())),
        })
}

fn string(text: &str) -> Value {
    Value::String(text.into())
}

fn arity(name: &str, expected: usize, got: usize) -> TemplateError {
    TemplateError::ArgCount {
        name: name.to_string(),
        expected,
        got,
    }
}

/// The arguments as text, as sprig's string functions take them (a nil is empty, a number its
/// digits).
fn strings<const N: usize>(name: &str, args: &[Value]) -> Result<[String; N], TemplateError> {
    if args.len() != N {
        return Err(arity(name, N, args.len()));
    }
    let mut out: [String; N] = std::array::from_fn(|_| String::new());
    for (slot, value) in out.iter_mut().zip(args) {
        *slot = match value {
            Value::Nil => String::new(),
            Value::String(text) => text.to_string(),
            Value::Bool(flag) => flag.to_string(),
            Value::Int(number) => number.to_string(),
            Value::Uint(number) => number.to_string(),
            Value::Float(number) => number.to_string(),
            other => {
                return Err(TemplateError::Exec(format!(
                    "{name}: expected text, got {other:?}"
                )));
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gotmpl::tmap;

    #[test]
    fn kurl_actions_render_and_troubleshoots_pass_through() {
        let data = tmap! {
            "IsJoin" => true,
            "IsUpgrade" => false,
            "RemoteHosts" => vec!["10.0.0.1", "10.0.0.2"],
            "Address" => "lb.example:6443/",
        };
        let text = "a:\n{{kurl- if and .IsJoin (not .IsUpgrade)}}\n{{kurl- range .RemoteHosts}}\n  - {{kurl . }}\n{{kurl- end}}\n{{kurl- end}}\nm: '{{ .P99 }} {{kurl .IsUpgrade | not }} {{kurl .Address | trimSuffix \"/\" }}'\n";
        assert_eq!(
            render_kurl("t", text, &data).unwrap(),
            "a:\n  - 10.0.0.1\n  - 10.0.0.2\nm: '{{ .P99 }} true lb.example:6443'\n"
        );
    }

    #[test]
    fn a_few_bytes_that_ask_for_gigabytes_are_refused_at_once() {
        let hosts: Vec<String> = (0..10).map(|index| format!("10.0.0.{index}")).collect();
        let data = tmap! { "RemoteHosts" => hosts };
        // Each replace squares the text; a range writes it again and again.
        let squaring = format!(
            "{{{{kurl $x := \"{}\" }}}}{{{{kurl $x = replace \"a\" $x $x }}}}{{{{kurl $x = replace \"a\" $x $x }}}}{{{{kurl $x = replace \"a\" $x $x }}}}{{{{kurl $x }}}}",
            "a".repeat(100)
        );
        let started = std::time::Instant::now();
        let error = render_kurl("f", &squaring, &data).unwrap_err().to_string();
        assert!(
            error.contains("more than a host preflight may be"),
            "{error}"
        );
        let repeating = format!(
            "{{{{kurl $x := \"{}\" }}}}{{{{kurl range .RemoteHosts }}}}{{{{kurl range $.RemoteHosts }}}}{{{{kurl range $.RemoteHosts }}}}{{{{kurl $x }}}}{{{{kurl end }}}}{{{{kurl end }}}}{{{{kurl end }}}}",
            "b".repeat(4096)
        );
        assert!(repeating.len() < 4400);
        let error = render_kurl("f", &repeating, &data).unwrap_err().to_string();
        assert!(
            error.contains("renders to more than the 1048576 bytes"),
            "{error}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_missing_field_and_an_unknown_function_are_errors() {
        let data = tmap! { "IsJoin" => true };
        let missing = render_kurl("f", "{{kurl .IsJoinn }}", &data).unwrap_err();
        assert!(missing.to_string().contains("IsJoinn"), "{missing}");
        let unknown = render_kurl("f", "x\n{{kurl nosuch .IsJoin }}", &data).unwrap_err();
        assert!(unknown.to_string().contains("nosuch"), "{unknown}");
    }

    #[test]
    fn sprig_functions_behave_as_sprigs() {
        let data = tmap! { "V" => "1.6.3", "K" => "1.96.1-nightly" };
        let cases = [
            ("{{kurl semverCompare \"1.6.0 - 1.6.4\" .V }}", "true"),
            ("{{kurl semverCompare \">= 1.6.4\" .V }}", "false"),
            ("{{kurl .K | contains \"nightly\" }}", "true"),
            ("{{kurl default \"x\" \"\" }}", "x"),
            ("{{kurl empty .V }}", "false"),
        ];
        for (text, expected) in cases {
            assert_eq!(render_kurl("t", text, &data).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn messages_render_from_results_and_keep_their_text_on_error() {
        let data = tmap! { "P99" => "3ms" };
        assert_eq!(render_message("p99 {{ .P99 }}", &data), "p99 3ms");
        assert_eq!(render_message("bad {{ .P99", &data), "bad {{ .P99");
    }
}

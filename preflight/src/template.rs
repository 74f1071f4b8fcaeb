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
    with_functions(Template::new(name))
        .delims(KURL_LEFT, KURL_RIGHT)
        .missing_key(MissingKey::Error)
        .max_range_iters(MAX_RANGE_ITERATIONS)
        .parse(text)?
        .execute_to_string(data)
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
        .and_then(|template| template.execute_to_string(data))
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

//! Go's `flag` package syntax, which kURL's programs parse: `-name value`, `-name=value`,
//! `--name=value`, a boolean `-name` (or `-name=false`); parsing stops at `--` or the first
//! argument that is not a flag.

use std::collections::BTreeMap;

use super::Failure;

/// One flag: its name, whether it is boolean, its default and its usage line.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    pub name: &'static str,
    pub boolean: bool,
    pub default: &'static str,
    pub usage: &'static str,
}

/// A program's flags.
#[derive(Debug, Clone, Copy)]
pub struct FlagSet {
    pub program: &'static str,
    pub flags: &'static [Flag],
}

/// The values given (or defaulted) and the arguments after the flags.
#[derive(Debug, Default)]
pub struct Parsed {
    values: BTreeMap<&'static str, String>,
    pub rest: Vec<String>,
}

impl Parsed {
    /// The flag's value, its default when not given.
    pub fn get(&self, name: &str) -> &str {
        self.values.get(name).map_or("", String::as_str)
    }

    /// A boolean flag's value.
    pub fn on(&self, name: &str) -> bool {
        self.get(name) == "true"
    }
}

impl FlagSet {
    /// The usage text Go's `flag.PrintDefaults` prints.
    pub fn usage(&self) -> String {
        let mut text = format!("Usage of {}:\n", self.program);
        for flag in self.flags {
            let kind = if flag.boolean { "" } else { " string" };
            text.push_str(&format!("  -{}{kind}\n    \t{}", flag.name, flag.usage));
            if !flag.boolean && !flag.default.is_empty() {
                text.push_str(&format!(" (default {:?})", flag.default));
            }
            text.push('\n');
        }
        text
    }

    pub fn parse(&self, arguments: &[String]) -> Result<Parsed, Failure> {
        let mut parsed = Parsed::default();
        for flag in self.flags {
            let default = if flag.boolean && flag.default.is_empty() {
                "false"
            } else {
                flag.default
            };
            parsed.values.insert(flag.name, default.to_string());
        }
        let refuse = |reason: String| Failure::Usage(format!("{reason}\n{}", self.usage()));
        let mut index = 0;
        while index < arguments.len() {
            let argument = &arguments[index];
            if argument == "--" {
                index += 1;
                break;
            }
            let Some(body) = argument
                .strip_prefix("--")
                .or_else(|| argument.strip_prefix('-'))
                .filter(|body| {
                    !body.is_empty() && !body.starts_with('-') && !body.starts_with('=')
                })
            else {
                if argument.starts_with('-') && argument != "-" {
                    return Err(refuse(format!("bad flag syntax: {argument}")));
                }
                break;
            };
            let (name, inline) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (body, None),
            };
            if matches!(name, "h" | "help") && !self.flags.iter().any(|flag| flag.name == name) {
                return Err(Failure::Help(self.usage()));
            }
            let Some(flag) = self.flags.iter().find(|flag| flag.name == name) else {
                return Err(refuse(format!("flag provided but not defined: -{name}")));
            };
            let value = if flag.boolean {
                match inline.as_deref() {
                    None => "true".to_string(),
                    Some("1" | "t" | "T" | "true" | "TRUE" | "True") => "true".to_string(),
                    Some("0" | "f" | "F" | "false" | "FALSE" | "False") => "false".to_string(),
                    Some(other) => {
                        return Err(refuse(format!(
                            "invalid boolean value {other:?} for -{name}: parse error"
                        )));
                    }
                }
            } else if let Some(value) = inline {
                value
            } else {
                index += 1;
                match arguments.get(index) {
                    Some(value) => value.clone(),
                    None => return Err(refuse(format!("flag needs an argument: -{name}"))),
                }
            };
            parsed.values.insert(flag.name, value);
            index += 1;
        }
        parsed.rest = arguments[index.min(arguments.len())..].to_vec();
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: FlagSet = FlagSet {
        program: "t",
        flags: &[
            Flag {
                name: "a",
                boolean: true,
                default: "",
                usage: "add",
            },
            Flag {
                name: "fp",
                boolean: false,
                default: "",
                usage: "file",
            },
        ],
    };

    fn parse(words: &[&str]) -> Result<Parsed, Failure> {
        SET.parse(
            &words
                .iter()
                .map(|word| word.to_string())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn go_flag_syntax() {
        let parsed = parse(&["-a", "--fp=x", "rest", "-a"]).unwrap();
        assert!(parsed.on("a"));
        assert_eq!(parsed.get("fp"), "x");
        assert_eq!(parsed.rest, ["rest", "-a"]);
        let parsed = parse(&["-fp", "y", "-a=false"]).unwrap();
        assert_eq!(parsed.get("fp"), "y");
        assert!(!parsed.on("a"));
        assert!(
            matches!(parse(&["-zz"]), Err(Failure::Usage(text)) if text.starts_with("flag provided but not defined: -zz"))
        );
        assert!(
            matches!(parse(&["-fp"]), Err(Failure::Usage(text)) if text.starts_with("flag needs an argument: -fp"))
        );
        assert!(matches!(parse(&["-h"]), Err(Failure::Help(_))));
    }
}

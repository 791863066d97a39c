//! `--set KEY=VALUE` overrides, applied to the raw scenario table before validation.
//!
//! KEY is dotted (`params.v11`, `model.beta`, `tokens.n`, `run.model`, `model.A.seed`). VALUE is
//! read as a TOML value (number, bool, quoted string, array, inline table) and otherwise taken
//! as a bare string, so `model.kernel=usa` and `model.A=identity` work; for keys that only hold
//! strings (`name`, `model.kernel`, `tokens.path`, ...) VALUE is always the text itself unless
//! quoted. Only known keys can be set, as in the file; a missing table is created only for the
//! optional tables (`[params]`, `[solver]`, `[run]`, `[output]`). Any new `params.NAME` is
//! allowed (validation checks the name).

use toml::Value;

use super::schema::{is_string_key, section_keys, OPTIONAL_TABLES, TOP_KEYS};

/// Apply one `KEY=VALUE` override to a raw scenario table.
pub fn apply_set(table: &mut toml::Table, set: &str) -> Result<(), String> {
    let Some((key, text)) = set.split_once('=') else {
        return Err(format!(
            "`{}` is not KEY=VALUE (e.g. model.beta=2)",
            set.escape_debug()
        ));
    };
    let key = key.trim();
    let value = parse_set_value(text.trim(), is_string_key(key));
    set_value(table, key, value)
}

/// Read the VALUE of an override: a TOML value if it parses as one, otherwise the bare text.
/// With `string_key`, anything but a quoted TOML string is taken as the bare text.
pub fn parse_set_value(text: &str, string_key: bool) -> Value {
    match text.parse::<Value>() {
        Ok(value @ Value::String(_)) => value,
        Ok(value) if !string_key => value,
        _ => Value::String(text.to_string()),
    }
}

/// Set a dotted key of a raw scenario table to `value`, with the same key rules as `--set`.
pub fn set_value(table: &mut toml::Table, key: &str, value: Value) -> Result<(), String> {
    let parts: Vec<&str> = key.split('.').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "`{}` is not a dotted key (e.g. model.beta)",
            key.escape_debug()
        ));
    }
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return Err("empty key".to_string()),
    };
    if !TOP_KEYS.contains(first) {
        let hint = match table.get("params") {
            Some(Value::Table(params)) if rest.is_empty() && params.contains_key(*first) => {
                format!("; did you mean `params.{first}`?")
            }
            _ => String::new(),
        };
        return Err(format!(
            "unknown key `{first}` (top-level keys are: {}){hint}",
            TOP_KEYS.join(", ")
        ));
    }
    let Some((second, deeper)) = rest.split_first() else {
        table.insert(first.to_string(), value);
        return Ok(());
    };
    if let Some(keys) = section_keys(first) {
        if !keys.contains(second) {
            return Err(format!(
                "unknown key `{second}` in [{first}] (keys are: {})",
                keys.join(", ")
            ));
        }
    } else if *first != "params" {
        return Err(format!("`{first}` is not a table"));
    }
    if !table.contains_key(*first) {
        if !OPTIONAL_TABLES.contains(first) {
            return Err(format!("the scenario has no [{first}] table"));
        }
        table.insert(first.to_string(), Value::Table(toml::Table::new()));
    }
    let Some(Value::Table(section)) = table.get_mut(*first) else {
        return Err(format!("`{first}` is not a table"));
    };
    // Deeper keys (e.g. model.A.seed) descend into tables that already exist.
    let mut current = section;
    let mut path = format!("{first}.{second}");
    let mut leaf = *second;
    for part in deeper {
        match current.get_mut(leaf) {
            Some(Value::Table(inner)) => current = inner,
            _ => {
                return Err(format!(
                    "`{path}` is not a table here; set the whole value instead ({path}={{ ... }})"
                ))
            }
        }
        path.push('.');
        path.push_str(part);
        leaf = part;
    }
    current.insert(leaf.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> toml::Table {
        r#"
            name = "x"
            [params]
            v11 = 0.2
            [model]
            kernel = "lsa"
            beta = 1.0
            A = { random = "gaussian", seed = 1 }
            [tokens]
            n = 4
        "#
        .parse()
        .unwrap()
    }

    fn set(t: &mut toml::Table, s: &str) -> Result<(), String> {
        apply_set(t, s)
    }

    #[test]
    fn values_are_parsed_as_toml_or_bare_strings() {
        let mut t = table();
        set(&mut t, "params.v11=0.3").unwrap();
        set(&mut t, "model.beta=2").unwrap();
        set(&mut t, "model.kernel=usa").unwrap();
        set(&mut t, "model.V=identity").unwrap();
        set(&mut t, "tokens.n = 4000").unwrap();
        set(&mut t, "model.A=[[1, 0], [0, 1]]").unwrap();
        set(&mut t, "output.trajectory=true").unwrap();
        assert_eq!(t["params"]["v11"], Value::Float(0.3));
        assert_eq!(t["model"]["beta"], Value::Integer(2));
        assert_eq!(t["model"]["kernel"], Value::String("usa".into()));
        assert_eq!(t["model"]["V"], Value::String("identity".into()));
        assert_eq!(t["tokens"]["n"], Value::Integer(4000));
        assert_eq!(t["model"]["A"].to_string(), "[[1, 0], [0, 1]]");
        assert_eq!(t["output"]["trajectory"], Value::Boolean(true));
    }

    #[test]
    fn string_keys_keep_their_text() {
        let mut t = table();
        set(&mut t, "name=123").unwrap();
        assert_eq!(t["name"], Value::String("123".into()));
        set(&mut t, "name=\"quoted\"").unwrap();
        assert_eq!(t["name"], Value::String("quoted".into()));
        set(&mut t, "description=a run with spaces").unwrap();
        assert_eq!(t["description"], Value::String("a run with spaces".into()));
        set(&mut t, "tokens.path=x0.csv").unwrap();
        assert_eq!(t["tokens"]["path"], Value::String("x0.csv".into()));
    }

    #[test]
    fn optional_tables_are_created_required_ones_not() {
        let mut t = table();
        set(&mut t, "solver.method=rk4").unwrap();
        set(&mut t, "run.model=oa").unwrap();
        assert_eq!(t["solver"]["method"], Value::String("rk4".into()));
        assert_eq!(t["run"]["model"], Value::String("oa".into()));
        let err = set(&mut t, "time.t_end=3").unwrap_err();
        assert!(err.contains("no [time] table"), "{err}");
    }

    #[test]
    fn new_params_may_be_added_nested_keys_descend() {
        let mut t = table();
        set(&mut t, "params.v99=1").unwrap();
        assert_eq!(t["params"]["v99"], Value::Integer(1));
        set(&mut t, "model.A.seed=5").unwrap();
        assert_eq!(t["model"]["A"]["seed"], Value::Integer(5));
        let err = set(&mut t, "model.beta.x=5").unwrap_err();
        assert!(err.contains("`model.beta` is not a table"), "{err}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        let mut t = table();
        let err = set(&mut t, "model.kernal=usa").unwrap_err();
        assert!(err.contains("unknown key `kernal` in [model]"), "{err}");
        let err = set(&mut t, "modle.beta=1").unwrap_err();
        assert!(err.contains("unknown key `modle`"), "{err}");
        let err = set(&mut t, "tokens.N=1").unwrap_err();
        assert!(err.contains("unknown key `N` in [tokens]"), "{err}");
        let err = set(&mut t, "name.x=1").unwrap_err();
        assert!(err.contains("not a table"), "{err}");
        assert!(set(&mut t, "model.beta").is_err());
        assert!(set(&mut t, "model..beta=1").is_err());
        assert!(set(&mut t, "=1").is_err());
        // The table is unchanged by failed sets.
        assert_eq!(t, {
            let mut u = table();
            u.insert("name".into(), t["name"].clone());
            u
        });
    }
}

//! `%env`: shows, sets and unsets environment variables of the process that runs cells; the
//! session re-applies settings to every new child.

use super::Host;
use crate::protocol::ErrorContent;
use dryml_magics::EnvCall;

pub fn run(host: &mut Host<'_>, call: &EnvCall) -> Result<(), ErrorContent> {
    match call {
        EnvCall::Unset(names) => {
            host.session.set_env(names.iter().map(|n| (n.clone(), None)).collect())?;
            host.print(&format!("unset {}\n", names.join(", ")));
            Ok(())
        }
        EnvCall::Set { name, value } => {
            host.session.set_env(vec![(name.clone(), Some(value.clone()))])?;
            host.print(&format!("env: {name}={value}\n"));
            Ok(())
        }
        EnvCall::Show(filter) => {
            let text = host.session.capture_stdout(&show_code(filter.as_deref()))?;
            match filter {
                Some(n) if text.trim() == "DRYML_ENV_UNSET" => {
                    Err(ErrorContent::new("KeyError", format!("environment variable {n} is not set")))
                }
                _ => {
                    host.print(&text);
                    Ok(())
                }
            }
        }
    }
}

/// The cell that prints the child's live environment (not the kernel's): one variable, or all.
pub fn show_code(filter: Option<&str>) -> String {
    match filter {
        Some(n) => format!(
            "match std::env::var_os({n:?}) {{ Some(v) => println!(\"{{}}\", v.to_string_lossy()), None => println!(\"DRYML_ENV_UNSET\") }}"
        ),
        None => "{ let mut v: Vec<_> = std::env::vars_os().map(|(k, v)| format!(\"{}={}\", k.to_string_lossy(), v.to_string_lossy())).collect(); v.sort(); for l in v { println!(\"{}\", l); } }".to_string(),
    }
}

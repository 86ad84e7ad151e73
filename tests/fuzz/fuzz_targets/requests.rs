//! The resource-request grammar, text (`tf num_gpus=1 gpu/0=0.5`) and JSON
//! (`{"tf": {"num_gpus": 1}}`): parsed requests print, and an error names a token that exists.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match dryml::compute::context::Requests::parse(text) {
        Ok(r) => {
            let _ = r.to_string();
            let _ = r.check_devices(4, 2);
        }
        Err(e) => {
            if let Some(t) = e.token {
                assert!(t < text.split_whitespace().count(), "token {t} of {text:?}");
            }
        }
    }
    if let Ok(r) = dryml_magics::compute_args::requests_from_json(text) {
        let _ = r.to_string();
    }
});

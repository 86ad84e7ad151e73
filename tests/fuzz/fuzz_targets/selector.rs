//! `Selector::parse` on any words (`%repo get` arguments): a selector, or an error naming a word.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let words: Vec<&str> = text.split_whitespace().collect();
    match dryml::objects::Selector::parse(&words) {
        Ok(s) => {
            let _ = s.to_string();
        }
        Err((_, at)) => assert!(at <= words.len(), "word {at} of {words:?}"),
    }
});

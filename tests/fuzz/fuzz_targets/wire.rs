//! Wire decoding and signature checking: frames as a peer sends them (split at 0xFF bytes).
//! Mode byte 0: decoded as given with a keyed signer (the signature check is what is fuzzed);
//! 1: signed correctly first, so the JSON behind the check is reached; 2: no key. What decodes
//! must encode and decode again to the same message.
#![no_main]

#[path = "../../../kernel/src/protocol/wire.rs"]
#[allow(dead_code)]
mod wire;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wire::{Message, Signer};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut frames: Vec<Bytes> = rest.split(|b| *b == 0xFF).map(Bytes::copy_from_slice).collect();
    let signer = Signer::new(if mode % 3 == 2 { "" } else { "fuzz-key" });
    if mode % 3 == 1 {
        if let Some(d) = frames.iter().position(|f| f.as_ref() == b"<IDS|MSG>") {
            if frames.len() >= d + 6 {
                let dicts: Vec<&[u8]> = frames[d + 2..d + 6].iter().map(|b| b.as_ref()).collect();
                let sig = signer.sign(&dicts);
                frames[d + 1] = Bytes::from(sig);
            }
        }
    }
    if let Ok(m) = Message::decode(frames, &signer) {
        let again = Message::decode(m.encode(&signer), &signer).expect("an encoded message decodes");
        assert_eq!((again.header, again.content, again.buffers), (m.header, m.content, m.buffers));
    }
});

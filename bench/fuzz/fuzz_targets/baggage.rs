//! The `x-deploy-channel-type` codec and the baggage member lookup: no panic on any text, and
//! the round trip documented on `Decisions::encode` ("`Decisions::parse(&d.encode())` gives
//! back the channels and colours of `d`").
#![no_main]

use dyeline_model::Decisions;
use dyeline_model::decision::baggage_member;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = baggage_member(&s, "x-deploy-channel-type");
    let d = Decisions::parse(&s);
    let encoded = d.encode();
    let back = Decisions::parse(&encoded);
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        d.iter().collect::<Vec<_>>(),
        "round trip changed the decisions; input {s:?}, encoded {encoded:?}"
    );
});

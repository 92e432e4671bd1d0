//! The `x-deploy-channel-type` codec and the baggage member lookup: no panic on any text, the
//! limits of `Decisions::parse` (never more than `MAX_PAIRS` pairs read, whatever the size),
//! and the round trip documented on `Decisions::encode` ("`Decisions::parse(&d.encode())` gives
//! back the channels and colours of `d`" when the text fits in `MAX_VALUE_BYTES`; a prefix of
//! them, marked truncated, when it does not).
#![no_main]

use dyeline_model::Decisions;
use dyeline_model::decision::{BAGGAGE_KEY, MAX_PAIRS, MAX_VALUE_BYTES, baggage_member};
use libfuzzer_sys::fuzz_target;

/// The limits hold for any parse.
fn check_limits(d: &Decisions, input: &str) {
    assert!(
        d.len() + d.malformed_pairs() as usize <= MAX_PAIRS,
        "more than {MAX_PAIRS} pairs read: {} decided, {} malformed; input {input:?}",
        d.len(),
        d.malformed_pairs()
    );
    assert!(d.conflicting().len() <= d.len());
    // At most one piece more than separators (`&`, or `%26` decoded).
    let pieces_at_most = input.matches('&').count() + input.matches("%26").count() + 1;
    if input.len() <= MAX_VALUE_BYTES && pieces_at_most <= MAX_PAIRS {
        assert!(!d.truncated(), "truncated under the limits; input {input:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Some(member) = baggage_member(&s, BAGGAGE_KEY) {
        check_limits(&Decisions::parse(&member), &member);
    }
    let d = Decisions::parse(&s);
    check_limits(&d, &s);
    let encoded = d.encode();
    let back = Decisions::parse(&encoded);
    let (d_pairs, back_pairs) = (d.iter().collect::<Vec<_>>(), back.iter().collect::<Vec<_>>());
    if encoded.len() <= MAX_VALUE_BYTES {
        assert_eq!(
            back_pairs, d_pairs,
            "round trip changed the decisions; input {s:?}, encoded {encoded:?}"
        );
        assert!(!back.truncated() && back.malformed_pairs() == 0);
    } else {
        assert!(back.truncated(), "encoded {} bytes", encoded.len());
        assert_eq!(
            back_pairs,
            d_pairs[..back_pairs.len()],
            "re-parse is not a prefix; input {s:?}"
        );
    }
});

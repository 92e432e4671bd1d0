//! OTLP/JSON decoding, then conversion to rows: neither may panic on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = dyeline_collector::json::decode_export_request(data) {
        // Documented to fail only on an internal Arrow error; here we only require no panic.
        let _ = dyeline_collector::convert_request(
            &req,
            &dyeline_collector::ConvertOptions::default(),
        );
    }
});

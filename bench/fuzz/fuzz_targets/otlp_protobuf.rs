//! OTLP/protobuf decoding, then conversion to rows: neither may panic on any input. The wire
//! reader (`dyeline_collector::wire`) must take no body prost refuses, and must read what
//! prost reads; no more spans are counted as having truncated decisions than were converted.
#![no_main]

use dyeline_collector::wire::RequestView;
use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let options = dyeline_collector::ConvertOptions::default();
    let prost = ExportTraceServiceRequest::decode(data);
    if let Ok(view) = RequestView::decode(data) {
        let req = prost.as_ref().expect("the wire reader took a body prost refuses");
        // Debug text, so that NaN doubles compare equal.
        assert_eq!(
            format!("{view:?}"),
            format!("{:?}", RequestView::from_prost(req))
        );
        // Documented to fail only on an internal Arrow error; here we only require no panic.
        if let Ok(rows) = dyeline_collector::convert_view(&view, &options) {
            assert!(rows.decisions_truncated <= rows.keys.len() as u64);
        }
    }
    if let Ok(req) = prost {
        if let Ok(rows) = dyeline_collector::convert_request(&req, &options) {
            assert!(rows.decisions_truncated <= rows.keys.len() as u64);
        }
    }
});

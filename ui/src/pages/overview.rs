//! The overview `/`: every channel (global first) with state, blue_percent, apps, requests/s
//! and error rate per colour, firing alerts and hops in the last 5 minutes; instances of
//! colour unknown listed and counted. The panels are in [`crate::panels`].

use leptos::prelude::*;

use super::Chrome;
use crate::panels::{ChannelTable, UnknownInstances};
use crate::source::Overview;

/// The overview's body.
pub fn body(chrome: &Chrome, data: &Overview) -> AnyView {
    let secs = chrome.range.rate_seconds(data.data_from_unix_nano);
    view! {
        <h1>{tr!(chrome.lang, "title.channels")}</h1>
        {super::staleness(chrome, data.analysed_to_unix_nano)}
        <ChannelTable chrome=chrome channels=&data.channels seconds=secs/>
        <UnknownInstances lang=chrome.lang instances=&data.unknown_instances/>
    }
    .into_any()
}

//! The channel page's instances (domain §6.5): requests per instance against its colour's
//! mean, skew marked, and the weight in force (domain §5).

use leptos::prelude::*;

use crate::pages::chip;
use crate::source::InstanceRow;

/// One row per instance of the channel's apps.
#[component]
pub fn Instances<'a>(
    /// The instances of the channel's apps.
    instances: &'a [InstanceRow],
) -> impl IntoView + use<> {
    let rows = instances
        .iter()
        .map(|i| {
            let ratio = if i.color_mean > 0.0 { i.requests as f64 / i.color_mean } else { 0.0 };
            let mark = i.skewed.then(|| view! { <span class="mark">"skewed"</span> });
            view! {
                <tr class=if i.skewed { "skewed" } else { "" }>
                    <td>{i.app.clone()}</td><td>{i.instance.clone()}</td><td>{chip(&i.color)}</td>
                    <td class="num">{i.requests}</td>
                    <td class="num">{format!("{:.1}", i.color_mean)}</td>
                    <td class="num">{format!("{ratio:.2}×")}</td>
                    <td>{mark}</td>
                    <td class="num">{i.weight.map_or_else(|| "–".to_owned(), |w| w.to_string())}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2>"Instances"</h2>
        <table class="data" id="instances">
            <thead><tr><th>"app"</th><th>"instance"</th><th>"colour"</th><th>"requests"</th><th>"colour mean"</th><th>"load vs mean"</th><th></th><th>"weight in force"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

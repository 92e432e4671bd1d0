//! The channel page's instances (domain §6.5): requests per instance against its colour's
//! mean, skew marked, and the weight in force (domain §5).

use leptos::prelude::*;

use crate::locale::Lang;
use crate::pages::chip;
use crate::source::InstanceRow;

/// One row per instance of the channel's apps.
#[component]
pub fn Instances<'a>(
    /// The page's language.
    lang: Lang,
    /// The instances of the channel's apps.
    instances: &'a [InstanceRow],
) -> impl IntoView + use<> {
    let l = lang;
    let rows = instances
        .iter()
        .map(|i| {
            let ratio = if i.color_mean > 0.0 { i.requests as f64 / i.color_mean } else { 0.0 };
            let mark = i.skewed.then(|| view! { <span class="mark">{tr!(l, "instances.skewed")}</span> });
            view! {
                <tr class=if i.skewed { "skewed" } else { "" }>
                    <td>{i.app.clone()}</td><td>{i.instance.clone()}</td><td>{chip(l, &i.color)}</td>
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
        <h2>{tr!(l, "instances.title")}</h2>
        <table class="data" id="instances">
            <thead><tr><th>{tr!(l, "col.app")}</th><th>{tr!(l, "col.instance")}</th><th>{tr!(l, "col.colour")}</th><th>{tr!(l, "col.requests")}</th><th>{tr!(l, "col.colour_mean")}</th><th>{tr!(l, "col.load_vs_mean")}</th><th></th><th>{tr!(l, "col.weight_in_force")}</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

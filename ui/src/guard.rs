//! The spike guard of the channel page's controls: while a one-sided error spike (domain
//! §6.6) fires on the colour that would gain traffic, a change that increases that colour's
//! share is refused with the reason, unless the owner ticks an override (recorded as the
//! operation's note, and sent as `force`). The rule is `dyeline_model::release::spike_guard`'s,
//! the one the control plane enforces on every write (API and dashboard): this page shows its
//! verdict before asking.

use dyeline_model::release::spike_guard;

use crate::locale::Lang;
use crate::source::{Action, AlertLine, ChannelRow};

/// The colour whose share `action` increases on `channel`, if any: blue when blue_percent
/// rises, green when it falls (domain §4).
pub fn gaining_color(channel: &ChannelRow, action: &Action) -> Option<&'static str> {
    spike_guard::gaining_color(channel.blue_percent, action.blue_percent_after())
        .map(dyeline_model::Color::as_str)
}

/// Why `action` must be refused on `channel` given its `alerts`, in `lang`, or `None` when it
/// may go ahead. Only firing alerts that [`spike_guard::blocks`] the change count. (The note
/// recorded with an override is always the English one: the audit log reads the same for
/// every reader.)
pub fn refusal(
    lang: Lang,
    channel: &ChannelRow,
    action: &Action,
    alerts: &[AlertLine],
) -> Option<String> {
    let gaining = gaining_color(channel, action)?;
    let (from, to) = (channel.blue_percent, action.blue_percent_after());
    let spike = alerts.iter().find(|a| {
        a.state == "firing" && spike_guard::blocks(from, to, &a.kind, a.color.as_deref())
    })?;
    Some(tr!(
        lang,
        "guard.refusal",
        from = channel.blue_percent,
        to = action.blue_percent_after(),
        gaining = gaining,
        summary = spike.summary
    ))
}

/// The note recorded with an overriding write.
pub fn override_note(reason: &str) -> String {
    let mut note = format!("override: {reason}");
    if note.chars().count() > 480 {
        note = note.chars().take(477).collect::<String>() + "...";
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::ColorLoad;

    fn channel(bp: u8) -> ChannelRow {
        ChannelRow {
            id: "trade".into(),
            state: "releasing".into(),
            blue_percent: bp,
            apps: vec!["order".into()],
            blue: ColorLoad::default(),
            green: ColorLoad::default(),
            unknown_requests: 0,
            firing_alerts: 1,
            hops_last_5m: 0,
        }
    }

    fn spike(color: &str, state: &str) -> AlertLine {
        AlertLine {
            name: "ErrorSpike".into(),
            state: state.into(),
            labels: format!("color={color}"),
            summary: format!("{color} error rate 30%"),
            color: Some(color.into()),
            kind: "error_spike".into(),
            starts_at_unix_nano: 0,
            ends_at_unix_nano: None,
            trace_ids: vec![],
        }
    }

    #[test]
    fn an_increase_towards_a_spiking_colour_is_refused() {
        let r = refusal(
            Lang::En,
            &channel(10),
            &Action::Ratio(50),
            &[spike("blue", "firing")],
        );
        let r = r.expect("refused");
        assert!(r.contains("10 → 50"), "{r}");
        assert!(r.contains("blue error rate 30%"), "{r}");
        let zh = refusal(
            Lang::ZhCn,
            &channel(10),
            &Action::Ratio(50),
            &[spike("blue", "firing")],
        )
        .expect("refused in Chinese too");
        assert!(zh.starts_with("已拒绝：blue_percent 10 → 50"), "{zh}");
        // Green gains when blue_percent falls.
        assert!(
            refusal(
                Lang::En,
                &channel(50),
                &Action::Ratio(0),
                &[spike("green", "firing")]
            )
            .is_some()
        );
    }

    #[test]
    fn moving_away_from_the_spike_or_a_resolved_spike_is_allowed() {
        assert_eq!(
            refusal(
                Lang::En,
                &channel(50),
                &Action::Ratio(0),
                &[spike("blue", "firing")]
            ),
            None
        );
        assert_eq!(
            refusal(
                Lang::En,
                &channel(10),
                &Action::Ratio(50),
                &[spike("blue", "resolved")]
            ),
            None
        );
        assert_eq!(
            refusal(
                Lang::En,
                &channel(50),
                &Action::Ratio(50),
                &[spike("blue", "firing")]
            ),
            None
        );
        // Finish returns to 50: from 100 that moves traffic to green.
        assert!(
            refusal(
                Lang::En,
                &channel(100),
                &Action::Finish,
                &[spike("green", "firing")]
            )
            .is_some()
        );
        assert_eq!(
            refusal(
                Lang::En,
                &channel(100),
                &Action::Finish,
                &[spike("blue", "firing")]
            ),
            None
        );
    }

    #[test]
    fn override_note_is_bounded() {
        let long = "x".repeat(2000);
        assert!(override_note(&long).chars().count() <= 480);
        assert_eq!(override_note("r"), "override: r");
    }
}

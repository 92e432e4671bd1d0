//! The sign-in page: an API token (from `[[api.tokens]]`, `DYELINE_API_TOKEN` or the
//! generated `data_dir/api-token`) checked against the control plane and kept in an HttpOnly
//! cookie.

use leptos::prelude::*;

use super::Chrome;

/// The sign-in page's body; `error` after a refused token.
pub fn body(chrome: &Chrome, next: &str, error: Option<&str>) -> AnyView {
    let l = chrome.lang;
    let error =
        error.map(|e| view! { <p class="error" role="alert" id="login-error">{e.to_owned()}</p> });
    view! {
        <h1>{tr!(l, "title.sign_in")}</h1>
        {error}
        <form method="post" action="/login" id="login-form">
            <input type="hidden" name="csrf" value=chrome.csrf.clone()/>
            <input type="hidden" name="next" value=next.to_owned()/>
            <label>{tr!(l, "login.token")} " " <input type="password" name="token" id="token" autocomplete="current-password" required=true/></label>
            <button type="submit" id="login">{tr!(l, "title.sign_in")}</button>
        </form>
        <p class="hint">{tr!(l, "login.hint")}</p>
    }
    .into_any()
}

//! Turn-end hooks: [`TurnEnd`], run when the model ends a turn, which may
//! ask the host to carry on.

use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString};
use serde::Deserialize;

use crate::ffi::{ExecContextRef, ServiceBox, TurnEndHook};

use super::guard::guard;
use super::tool::ToolContext;

/// What a turn-end hook is told about the turn the model just ended.
#[derive(Debug, Clone, Deserialize)]
pub struct TurnInfo {
    /// The session's id.
    pub session: String,
    /// The turn's number.
    pub turn: u64,
    /// The step the model ended it in.
    pub step: u64,
    /// The model's last text.
    #[serde(default)]
    pub text: String,
}

/// A hook run when the model ends a turn (see [`Context::on_turn_end`](super::Context::on_turn_end)).
pub trait TurnEnd: Send + Sync + 'static {
    /// Called with the turn; `cx` appends this plugin's event types to the
    /// session. Return `true` to let the model take another step.
    ///
    /// # Errors
    /// A short message; the host logs it and ends the turn as usual.
    fn turn_end(&self, turn: &TurnInfo, cx: &ToolContext<'_>) -> Result<bool, String>;
}

pub(super) struct TurnEndAdapter<H> {
    pub(super) inner: H,
    pub(super) plugin: &'static str,
}

impl<H: TurnEnd> TurnEndHook for TurnEndAdapter<H> {
    fn turn_end(&self, turn: RStr<'_>, cx: ExecContextRef<'_>) -> RResult<bool, RString> {
        let outcome = guard(self.plugin, "turn_end", || {
            let info: TurnInfo = serde_json::from_str(turn.as_str()).map_err(|e| format!("the host sent a turn this SDK cannot read: {e}"))?;
            let context = ToolContext { raw: &cx };
            self.inner.turn_end(&info, &context)
        });
        match outcome {
            Ok(b) => ROk(b),
            Err(e) => RErr(e.into()),
        }
    }

    fn extension(&self, _name: RStr<'_>, _version: u32) -> ROption<ServiceBox> {
        ROption::RNone
    }
}

// §2 of the guide: borrowing the arguments from the host's parse.

use cordis_abi::prelude::*;

use crate::hello::{Args, Config};

struct Greet { greeting: String }

use std::borrow::Cow;

/// `Args`, borrowing `name` from the host's parse (same fields, same serde attributes).
#[derive(Deserialize)]
struct ArgsRef<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

impl Greet {
    /// The tool's work, for both entry points.
    fn greet(&self, name: &str) -> ToolReply {
        ToolReply { text: format!("{}, {}!", self.greeting, name), value: None }
    }
}

impl TypedTool for Greet {
    type Args = Args;
    fn name(&self) -> &str { "greet" }
    fn description(&self) -> String { "Greets someone by name.".into() }
    fn execute(&self, args: Args, _cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        Ok(self.greet(&args.name))
    }
    fn execute_parsed(&self, args: ParsedArgs<'_>, _cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        let args: ArgsRef<'_> = args.deserialize()?;
        let reply = self.greet(&args.name);
        Ok(EncodedReply { text: reply.text, value: None })   // a value: EncodedReply::new(text, &value)
    }
}

/// The same `greet`, answering from borrowed arguments.
pub struct BorrowingHello;

impl Plugin for BorrowingHello {
    const NAME: &'static str = "hello-borrowing";
    const INJECT: &'static [&'static str] = &["tools"];
    type Config = Config;
    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.tools()?.register(Greet { greeting: config.greeting })
    }
}

cordis_abi::export_plugin!(BorrowingHello);

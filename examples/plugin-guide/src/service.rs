// §4 of the guide: a service, and a tool that calls it.

use cordis_abi::prelude::*;
use serde_json::json;

use crate::hello::{Args, Config};
use crate::stamp::Empty;

/// Provides `greeter`.
pub struct Hello;

struct Greeter { greeting: String }
impl ServiceProvider for Greeter {
    fn call(&self, method: &str, args: serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        match method {
            "greet" => {
                let name = args["name"].as_str().ok_or_else(|| ServiceError::new("greet takes {\"name\": TEXT}"))?;
                Ok(serde_json::json!({"text": format!("{}, {name}!", self.greeting)}))
            }
            "value" => Ok(serde_json::json!({"greeting": self.greeting})),
            other => Err(ServiceError::new(format!("no request `{other}`"))),
        }
    }
}

impl Plugin for Hello {
    const PROVIDES: &'static [&'static str] = &["greeter"];
    const NAME: &'static str = "greeter";
    type Config = Config;
    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.provide("greeter", Greeter { greeting: config.greeting })
    }
}

struct Welcome { greeter: ServiceHandle }

/// Injects `greeter`; registers `welcome`.
pub struct Welcomer;

impl Plugin for Welcomer {
    const INJECT: &'static [&'static str] = &["tools", "greeter"];
    const NAME: &'static str = "welcomer";
    type Config = Empty;
    fn apply(ctx: &Context<'_>, _config: Empty) -> Result<(), PluginError> {
        let greeter = ctx.service("greeter")?;
        ctx.tools()?.register(Welcome { greeter })
    }
}

impl TypedTool for Welcome {
    type Args = Args;
    fn name(&self) -> &str { "welcome" }
    fn description(&self) -> String { "Welcomes someone, through the greeter service.".into() }
    fn execute(&self, args: Args, _cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        let reply = self.greeter.call("greet", &json!({"name": args.name}))?;   // a ServiceError becomes the ToolError
        Ok(ToolReply { text: reply["text"].as_str().unwrap_or_default().to_string(), value: None })
    }
}

cordis_abi::export_plugin!(Hello);
cordis_abi::export_plugin!(Welcomer);

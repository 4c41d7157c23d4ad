//! One file per command, as in youki's `commands/`.

pub mod cdi_hook;
pub mod checkpoint;
pub mod create;
pub mod delete;
pub mod doctor;
pub mod events;
pub mod exec;
pub mod features;
pub mod generate_docs;
pub mod gpu;
pub mod import;
pub mod kill;
pub mod list;
pub mod lxc_hook;
pub mod pause;
pub mod ps;
pub mod restore;
pub mod resume;
pub mod run;
pub mod setup;
pub mod spec;
pub mod start;
pub mod state;
pub mod update;
pub mod verify;

use anyhow::Result;

use crate::cli::Command;
use crate::runtime::context::Ctx;
use crate::runtime::protect::stub_policy::Protection;

/// Runs one command; the result is the process exit code.
pub fn dispatch(ctx: &Ctx, command: Command, protection: Protection) -> Result<i32> {
    match command {
        Command::Create(args) => create::create(ctx, args).map(|_| 0),
        Command::Start(args) => start::start(ctx, args).map(|_| 0),
        Command::Run(args) => run::run(ctx, args, protection),
        Command::State(args) => state::state(ctx, args).map(|_| 0),
        Command::Kill(args) => kill::kill(ctx, args).map(|_| 0),
        Command::Delete(args) => delete::delete(ctx, args).map(|_| 0),
        Command::Exec(args) => exec::exec(ctx, args),
        Command::Checkpoint(args) => checkpoint::checkpoint(ctx, args).map(|_| 0),
        Command::Restore(args) => restore::restore(ctx, args),
        Command::Ps(args) => ps::ps(ctx, args).map(|_| 0),
        Command::List(args) => list::list(ctx, args).map(|_| 0),
        Command::Pause(args) => pause::pause(ctx, args).map(|_| 0),
        Command::Resume(args) => resume::resume(ctx, args).map(|_| 0),
        Command::Update(args) => update::update(ctx, args).map(|_| 0),
        Command::Features(_) => features::features().map(|_| 0),
        Command::Spec(args) => spec::spec(args).map(|_| 0),
        Command::Events(args) => events::events(ctx, args).map(|_| 0),
        Command::Import {
            remove: true,
            output,
            ..
        } => import::remove(&output),
        Command::Import { image, output, .. } => {
            import::import(image.as_deref().unwrap_or_default(), &output)
        }
        Command::Setup(args) => setup::setup(args, &ctx.settings),
        Command::LxcHook(args) => lxc_hook::lxc_hook(ctx, args),
        Command::Doctor { gpu } => doctor::doctor(ctx, gpu),
        Command::Gpu(crate::cli::GpuCommand::Verify { rootfs, gpus }) => {
            verify::verify(ctx, rootfs, &gpus)
        }
        Command::Gpu(args) => gpu::gpu(ctx, args).map(|_| 0),
        Command::CdiHook { args } => cdi_hook::cdi_hook(&args).map(|_| 0),
        Command::GenerateDocs { dir } => generate_docs::generate_docs(&dir).map(|_| 0),
    }
}

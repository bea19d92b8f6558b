//! The runtime a process starts once: the engine, the compiled-component cache, and one
//! linker per plugin kind, each capability linked into it through its own projection of a
//! call's [`HostState`].

use std::path::PathBuf;

use wasmtime::Engine;
use wasmtime::component::{InstancePre, Linker};

use crate::cache::{Compiled, ComponentCache};
use crate::engine::EpochTicker;
use crate::state::HostState;
use crate::{engine, http, listing, log, output, progress, protect, reading, shell};

/// Why the runtime could not start or a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
    #[error("plugin {plugin}: {message}")]
    Load { plugin: String, message: String },
}

/// The engine, the linker for each plugin kind, and the compiled-component cache.
pub struct Runtime {
    engine: Engine,
    tool_linker: Linker<HostState>,
    adapter_linker: Linker<HostState>,
    filter_linker: Linker<HostState>,
    cache: ComponentCache,
    _ticker: EpochTicker,
}

impl Runtime {
    /// Start the runtime, caching compiled plugins under `cache_dir` (no caching if `None`).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, RuntimeError> {
        let engine = engine::new_engine().map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let link =
            |what: &str, e: wasmtime::Error| RuntimeError::Engine(format!("linking {what}: {e:#}"));
        // Every kind gets the sandbox world: WASI (as narrowed per call), the filesystem
        // replacements in front of it, and the log. Each capability is linked with the
        // projection of the store's data its host functions see.
        let base = || -> Result<Linker<HostState>, RuntimeError> {
            let mut linker = Linker::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| link("WASI", e))?;
            protect::add_to_linker(&mut linker, HostState::protect)
                .map_err(|e| link("protected paths", e))?;
            listing::add_to_linker(&mut linker, HostState::listing)
                .map_err(|e| link("listings", e))?;
            reading::add_to_linker(&mut linker, HostState::table).map_err(|e| link("reads", e))?;
            log::add_to_linker(&mut linker, HostState::log).map_err(|e| link("log", e))?;
            Ok(linker)
        };
        let mut tool_linker = base()?;
        output::add_to_linker(&mut tool_linker, HostState::output)
            .map_err(|e| link("output", e))?;
        let mut adapter_linker = base()?;
        http::add_to_linker(&mut adapter_linker, HostState::http).map_err(|e| link("http", e))?;
        progress::add_to_linker(&mut adapter_linker, HostState::progress)
            .map_err(|e| link("progress", e))?;
        let mut filter_linker = base()?;
        shell::add_to_linker(&mut filter_linker, HostState::shell).map_err(|e| link("shell", e))?;
        let ticker = EpochTicker::start(&engine)
            .map_err(|e| RuntimeError::Engine(format!("cannot start the epoch thread: {e}")))?;
        let cache = ComponentCache::new(&engine, cache_dir);
        Ok(Runtime {
            engine,
            tool_linker,
            adapter_linker,
            filter_linker,
            cache,
            _ticker: ticker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }

    pub(crate) fn tool_linker(&self) -> &Linker<HostState> {
        &self.tool_linker
    }

    pub(crate) fn adapter_linker(&self) -> &Linker<HostState> {
        &self.adapter_linker
    }

    /// Compile `wasm` (or load it from the cache) and link it with `linker`: the first steps of
    /// loading a plugin of any kind. Errors name the plugin and say what is wrong with it.
    pub(crate) fn link(
        &self,
        name: &str,
        wasm: &[u8],
        linker: &Linker<HostState>,
    ) -> Result<(Compiled, InstancePre<HostState>), RuntimeError> {
        let fail = |message: String| RuntimeError::Load {
            plugin: name.to_string(),
            message,
        };
        let compiled = self
            .cache
            .load(&self.engine, wasm)
            .map_err(|e| fail(format!("not a valid WebAssembly component: {e:#}")))?;
        // `wasi:http`, which toolchains import whether the plugin uses it or not, is linked to
        // stubs that trap: denied, as the manifest check lists it. (`wasi:sockets` is linked to
        // WASI, which has no network in any call.)
        let imports_http = compiled
            .component
            .component_type()
            .imports(&self.engine)
            .any(|(name, _)| name.starts_with("wasi:http/"));
        let pre = if imports_http {
            let mut denying = linker.clone();
            deny_imports(
                &mut denying,
                &self.engine,
                &compiled.component,
                "wasi:http/",
            )
            .map_err(|e| fail(format!("cannot deny its wasi:http imports: {e:#}")))?;
            denying.instantiate_pre(&compiled.component)
        } else {
            linker.instantiate_pre(&compiled.component)
        }
        .map_err(|e| fail(format!("needs an import rawko does not provide: {e:#}")))?;
        Ok((compiled, pre))
    }

    pub(crate) fn filter_linker(&self) -> &Linker<HostState> {
        &self.filter_linker
    }
}

/// A resource rawko never creates: what a denied interface's resources are linked to.
struct Denied;

/// Link every instance `component` imports whose name starts with `prefix` to stubs: each
/// function traps, saying the interface is denied, and each resource is one rawko never makes.
/// (wasmtime's `define_unknown_imports_as_traps` would also stub newer minor versions of
/// interfaces the linker serves by semver, such as `wasi:io@0.2.12`, and break them.)
fn deny_imports(
    linker: &mut Linker<HostState>,
    engine: &Engine,
    component: &wasmtime::component::Component,
    prefix: &str,
) -> wasmtime::Result<()> {
    use wasmtime::component::types::ComponentItem;
    let ty = component.component_type();
    // Resources the denied interfaces only use from others (`wasi:io`'s streams and pollables
    // in `wasi:http/types`) are left to the real definitions.
    let mut served = Vec::new();
    for (name, import) in ty.imports(engine) {
        if let ComponentItem::ComponentInstance(instance) = import.ty
            && !name.starts_with(prefix)
        {
            for (_, export) in instance.exports(engine) {
                if let ComponentItem::Resource(r) = export.ty {
                    served.push(r);
                }
            }
        }
    }
    for (name, import) in ty.imports(engine) {
        if !name.starts_with(prefix) {
            continue;
        }
        let ComponentItem::ComponentInstance(instance) = import.ty else {
            continue;
        };
        let mut stub = linker.instance(name)?;
        for (item, export) in instance.exports(engine) {
            match export.ty {
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{item}");
                    stub.func_new(item, move |_, _, _, _| {
                        wasmtime::bail!("`{what}` is denied: rawko gives plugins no wasi:http")
                    })?;
                }
                ComponentItem::Resource(r) if !served.contains(&r) => {
                    stub.resource(
                        item,
                        wasmtime::component::ResourceType::host::<Denied>(),
                        |_, _| Ok(()),
                    )?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

//! The optional `orchard:shortcuts/shortcuts` export, read by flag name.
//!
//! Generated bindings would type-check the `shortcut` flags member by member, so a component
//! built against a WIT with one more member (a newer SDK) or one fewer (an older one) would be
//! refused. The host reads the flags dynamically instead: the export must be a function without
//! parameters answering one flags value; the names it sets are mapped to [`Shortcuts`], and a
//! name this host does not know is ignored (the generic flow for it — every shortcut only
//! skips calls, so ignoring one is always safe).

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ComponentExportIndex, Func, Instance, Type, Val};
use wasmtime::{AsContextMut, Store};

use super::bindings::SHORTCUTS_EXPORT;
use super::state::PluginState;
use crate::actuator::Shortcuts;

/// The function in the export.
const FUNCTION: &str = "shortcuts";

/// Where the `shortcuts` function is in every instance of one component.
pub(crate) struct ShortcutsExport {
    func: ComponentExportIndex,
}

impl ShortcutsExport {
    /// The export of `component`: `Ok(None)` without it (the generic flow); an export of
    /// another shape is an error naming what it has.
    pub(crate) fn find(component: &Component) -> wasmtime::Result<Option<Self>> {
        let Some((_, interface)) = component.get_export(None, SHORTCUTS_EXPORT) else {
            return Ok(None);
        };
        let shape = |what: &str| {
            wasmtime::format_err!(
                "export {SHORTCUTS_EXPORT} must have a function `{FUNCTION}` without parameters answering one `shortcut` flags value; {what}"
            )
        };
        let Some((item, func)) = component.get_export(Some(&interface), FUNCTION) else {
            return Err(shape("it has none"));
        };
        let ComponentItem::ComponentFunc(ty) = item else {
            return Err(shape("its `shortcuts` is not a function"));
        };
        let results: Vec<Type> = ty.results().collect();
        if ty.params().len() != 0 || !matches!(results.as_slice(), [Type::Flags(_)]) {
            return Err(shape("its `shortcuts` has another signature"));
        }
        Ok(Some(Self { func }))
    }

    /// The function in `instance` (which was made from the component this was found in).
    pub(crate) fn load(
        &self,
        store: impl AsContextMut,
        instance: &Instance,
    ) -> wasmtime::Result<Func> {
        instance
            .get_func(store, self.func)
            .ok_or_else(|| wasmtime::format_err!("the instance has no {SHORTCUTS_EXPORT}"))
    }
}

/// Calls `shortcuts` and answers the names of the flags it set.
pub(crate) async fn call(
    func: &Func,
    store: &mut Store<PluginState>,
) -> wasmtime::Result<Vec<String>> {
    let mut results = [Val::Bool(false)];
    func.call_async(&mut *store, &[], &mut results).await?;
    match results {
        [Val::Flags(names)] => Ok(names),
        [other] => Err(wasmtime::format_err!(
            "{FUNCTION} answered {other:?}, not flags"
        )),
    }
}

/// [`Shortcuts`] from the names of the set flags, and the names this host does not know.
pub(crate) fn from_names(names: &[String]) -> (Shortcuts, Vec<&str>) {
    let mut shortcuts = Shortcuts::default();
    let mut unknown = Vec::new();
    for name in names {
        match name.as_str() {
            "create-refuses-duplicates" => shortcuts.create_refuses_duplicates = true,
            "delete-is-synchronous" => shortcuts.delete_is_synchronous = true,
            "delete-by-id" => shortcuts.delete_by_id = true,
            other => unknown.push(other),
        }
    }
    (shortcuts, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn every_flag_the_host_knows_maps_to_its_shortcut() {
        let all = names(&[
            "create-refuses-duplicates",
            "delete-is-synchronous",
            "delete-by-id",
        ]);
        let (shortcuts, unknown) = from_names(&all);
        assert_eq!(
            shortcuts,
            Shortcuts {
                create_refuses_duplicates: true,
                delete_is_synchronous: true,
                delete_by_id: true,
            }
        );
        assert!(unknown.is_empty());
    }

    #[test]
    fn flags_of_a_component_built_with_fewer_members_set_only_theirs() {
        let declared = names(&["delete-is-synchronous"]);
        let (shortcuts, unknown) = from_names(&declared);
        assert_eq!(
            shortcuts,
            Shortcuts {
                delete_is_synchronous: true,
                ..Shortcuts::default()
            }
        );
        assert!(unknown.is_empty());
        assert!(from_names(&[]).0.is_none());
    }

    #[test]
    fn a_flag_the_host_does_not_know_is_ignored_and_named() {
        let declared = names(&["delete-by-id", "update-is-atomic"]);
        let (shortcuts, unknown) = from_names(&declared);
        assert_eq!(
            shortcuts,
            Shortcuts {
                delete_by_id: true,
                ..Shortcuts::default()
            }
        );
        assert_eq!(unknown, ["update-is-atomic"]);
    }
}

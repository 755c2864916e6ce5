//! The import graph of a crate's non-test code, by top-level module, read from its source.
//!
//! Starting at `lib.rs`, every `mod` not under `#[cfg(test)]` is followed (inline or in its
//! file), and every path that names the crate — `use crate::…`, `crate::…` in code and in
//! macro bodies, and `super::…` resolved from the module it appears in — is recorded as an
//! edge from the top-level module it appears in to the top-level module it names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One import: the file it is in, the path as written, and the two top-level modules.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub file: PathBuf,
    pub path: String,
}

/// Every cross-module import of the crate whose `lib.rs` is in `src`; a path into another
/// crate comes back with `from` its top-level module and `to` the path's first segment.
pub fn edges(src: &Path) -> Vec<Edge> {
    let mut out = BTreeSet::new();
    walk_file(&src.join("lib.rs"), &[], &mut out);
    out.into_iter().collect()
}

/// The paths into crate `krate` (e.g. `perpsim_systems`) of a crate's non-test code, as
/// written, with the file each is in.
pub fn paths_into(src: &Path, krate: &str) -> Vec<(PathBuf, String)> {
    edges(src)
        .into_iter()
        .filter(|e| e.to == krate)
        .map(|e| (e.file, e.path))
        .collect()
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()))
}

fn walk_file(file: &Path, module: &[String], out: &mut BTreeSet<Edge>) {
    let parsed = parse(file);
    walk_items(&parsed.items, file, module, out);
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The file of `mod name;` declared in `file` (a `mod.rs`/`lib.rs` owns its folder; any other
/// file `x.rs` owns `x/`).
fn module_file(file: &Path, name: &str, attrs: &[syn::Attribute]) -> PathBuf {
    let dir = file.parent().expect("a source file has a folder");
    if let Some(explicit) = path_attr(attrs) {
        return dir.join(explicit);
    }
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    let base = if stem == "mod" || stem == "lib" || stem == "main" {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let flat = base.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        base.join(name).join("mod.rs")
    }
}

fn walk_items(items: &[syn::Item], file: &Path, module: &[String], out: &mut BTreeSet<Edge>) {
    let mut paths = Paths { module, file, out };
    for item in items {
        match item {
            syn::Item::Mod(m) if is_test_only(&m.attrs) => {}
            syn::Item::Mod(m) => {
                let mut inner = module.to_vec();
                inner.push(m.ident.to_string());
                match &m.content {
                    Some((_, items)) => walk_items(items, file, &inner, paths.out),
                    None => walk_file(
                        &module_file(file, &m.ident.to_string(), &m.attrs),
                        &inner,
                        paths.out,
                    ),
                }
            }
            other if item_is_test_only(other) => {}
            other => paths.visit_item(other),
        }
    }
}

fn item_is_test_only(item: &syn::Item) -> bool {
    let attrs = match item {
        syn::Item::Fn(f) => &f.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(u) => &u.attrs,
        syn::Item::Struct(s) => &s.attrs,
        syn::Item::Enum(e) => &e.attrs,
        syn::Item::Const(c) => &c.attrs,
        syn::Item::Static(s) => &s.attrs,
        syn::Item::Trait(t) => &t.attrs,
        syn::Item::Type(t) => &t.attrs,
        syn::Item::Macro(m) => &m.attrs,
        _ => return false,
    };
    is_test_only(attrs)
}

struct Paths<'a> {
    module: &'a [String],
    file: &'a Path,
    out: &'a mut BTreeSet<Edge>,
}

impl Paths<'_> {
    /// Records `segments` (as written) if it names another top-level module.
    fn record(&mut self, segments: &[String]) {
        if segments.len() > 1 && segments[0].starts_with("perpsim_") {
            if let Some(from) = self.module.first() {
                self.out.insert(Edge {
                    from: from.clone(),
                    to: segments[0].clone(),
                    file: self.file.to_path_buf(),
                    path: segments.join("::"),
                });
            }
            return;
        }
        let Some(target) = resolve(self.module, segments) else {
            return;
        };
        let (Some(from), Some(to)) = (self.module.first(), target.first()) else {
            return;
        };
        if from != to {
            self.out.insert(Edge {
                from: from.clone(),
                to: to.clone(),
                file: self.file.to_path_buf(),
                path: segments.join("::"),
            });
        }
    }
}

/// The absolute module path `segments` names from inside `module`, when it starts at the
/// crate or climbs with `super`; `None` for anything else (a local or external name).
fn resolve(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    match segments.first().map(String::as_str) {
        Some("crate") => Some(segments[1..].to_vec()),
        Some("super") => {
            let mut here = module.to_vec();
            let mut rest = segments;
            while rest.first().map(String::as_str) == Some("super") {
                here.pop();
                rest = &rest[1..];
            }
            here.extend(rest.iter().cloned());
            Some(here)
        }
        _ => None,
    }
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push(with(prefix, n.ident.to_string())),
        syn::UseTree::Rename(r) => out.push(with(prefix, r.ident.to_string())),
        syn::UseTree::Glob(_) => out.push(with(prefix, "*".to_owned())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

fn with(prefix: &[String], last: String) -> Vec<String> {
    let mut v = prefix.to_vec();
    v.push(last);
    v
}

/// `crate :: a :: b` (or `super :: …`) sequences inside a macro's tokens.
fn macro_paths(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
    let mut current: Vec<String> = Vec::new();
    let mut after_colons = false;
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) => {
                let name = ident.to_string();
                if after_colons || name == "crate" || name == "super" {
                    if !after_colons {
                        flush(&mut current, out);
                    }
                    current.push(name);
                } else {
                    flush(&mut current, out);
                }
                after_colons = false;
            }
            proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => {
                after_colons = !current.is_empty();
            }
            proc_macro2::TokenTree::Group(group) => {
                flush(&mut current, out);
                macro_paths(group.stream(), out);
            }
            _ => flush(&mut current, out),
        }
    }
    flush(&mut current, out);
}

fn flush(current: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if current.len() > 1 {
        out.push(std::mem::take(current));
    }
    current.clear();
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_use(&mut self, node: &'ast syn::ItemUse) {
        if is_test_only(&node.attrs) {
            return;
        }
        let mut found = Vec::new();
        use_paths(&node.tree, &mut Vec::new(), &mut found);
        found.iter().for_each(|p| self.record(p));
    }

    fn visit_path(&mut self, node: &'ast syn::Path) {
        let segments: Vec<String> = node.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, node);
    }

    fn visit_macro(&mut self, node: &'ast syn::Macro) {
        let mut found = Vec::new();
        macro_paths(node.tokens.clone(), &mut found);
        found.iter().for_each(|p| self.record(p));
        syn::visit::visit_macro(self, node);
    }

    fn visit_item_fn(&mut self, node: &'ast syn::ItemFn) {
        if !is_test_only(&node.attrs) {
            syn::visit::visit_item_fn(self, node);
        }
    }

    fn visit_impl_item_fn(&mut self, node: &'ast syn::ImplItemFn) {
        if !is_test_only(&node.attrs) {
            syn::visit::visit_impl_item_fn(self, node);
        }
    }

    fn visit_item_mod(&mut self, node: &'ast syn::ItemMod) {
        // Inline modules nested inside items are walked by `walk_items`; a test module is not.
        if !is_test_only(&node.attrs) {
            syn::visit::visit_item_mod(self, node);
        }
    }
}

/// A violation: an import from `from` to a module in the same or a higher layer, or to a
/// module no layer names.
pub fn against_order(edges: &[Edge], layers: &[&[&str]]) -> Vec<String> {
    let rank = |m: &str| layers.iter().position(|layer| layer.contains(&m));
    edges
        .iter()
        .filter(|e| !e.to.starts_with("perpsim_"))
        .filter_map(|e| match (rank(&e.from), rank(&e.to)) {
            (Some(from), Some(to)) if to < from => None,
            (None, _) => Some(format!(
                "{}: module `{}` is in no layer",
                e.file.display(),
                e.from
            )),
            (_, None) => Some(format!(
                "{}: `{}` names `{}`, in no layer",
                e.file.display(),
                e.path,
                e.to
            )),
            _ => Some(format!(
                "{}: `{}` imports `{}` from `{}`, a layer not below it",
                e.file.display(),
                e.from,
                e.path,
                e.to
            )),
        })
        .collect()
}

//! `#[derive(dryml::Object)]`: implements `dryml::object::Object` for a type that implements
//! `dryml::object::Build`, and registers it under its name when its code is loaded. The
//! arguments and identity are the fields `args` and `meta`, or those marked `#[dryml(args)]`
//! and `#[dryml(meta)]`.
//!
//! A derive rather than a `macro_rules!` call because evcxr keeps a struct's attributes from
//! cell to cell but not a macro call beside it. No dependencies (no syn): the type's name and
//! `#[dryml(name = "...")]` are read from the tokens, which keeps the first `dryml` cell quick.

use proc_macro::{Delimiter, TokenStream, TokenTree};

#[proc_macro_derive(Object, attributes(dryml))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    match expand(input) {
        Ok(code) => code.parse().expect("generated code parses"),
        Err(msg) => format!("compile_error!({msg:?});").parse().expect("an error parses"),
    }
}

fn expand(input: TokenStream) -> Result<String, String> {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let mut name = None;
    let mut registered = None;
    let mut fields = None;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            // `#[dryml(name = "...")]`
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = tokens.get(i + 1) {
                    if let Some(Attr::Name(n)) = attr(g.stream())? {
                        registered = Some(n);
                    }
                }
                i += 2;
                continue;
            }
            TokenTree::Ident(id) if id.to_string() == "struct" => {
                match tokens.get(i + 1) {
                    Some(TokenTree::Ident(n)) => name = Some(n.to_string()),
                    _ => return Err("#[derive(dryml::Object)]: expected a type name".into()),
                }
                match tokens.get(i + 2) {
                    Some(TokenTree::Punct(p)) if p.as_char() == '<' => {
                        return Err(
                            "#[derive(dryml::Object)] does not take generic types: a registered type needs one name"
                                .into(),
                        );
                    }
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => fields = Some(g.stream()),
                    _ => return Err("#[derive(dryml::Object)] needs a struct with named fields (args and meta)".into()),
                }
                break;
            }
            TokenTree::Ident(id) if id.to_string() == "enum" => {
                return Err("#[derive(dryml::Object)] needs a struct with named fields (args and meta)".into());
            }
            _ => {}
        }
        i += 1;
    }
    let ty = name.ok_or("#[derive(dryml::Object)] applies to a struct")?;
    let registered = registered.unwrap_or_else(|| format!("{ty:?}"));
    let (args, meta) = roles(fields.expect("set with the name"))?;
    Ok(format!(
        r#"
impl ::dryml::objects::Object for {ty} {{
    fn type_name(&self) -> &'static str {{ {registered} }}
    fn definition(&self) -> ::dryml::objects::ObjectDef {{
        let args: &<{ty} as ::dryml::objects::Build>::Args = &self.{args};
        ::dryml::objects::ObjectDef::new({registered}, args)
            .expect("the arguments serialized when the object was built")
    }}
    fn meta(&self) -> &::dryml::objects::Meta {{ &self.{meta} }}
    fn meta_mut(&mut self) -> &mut ::dryml::objects::Meta {{ &mut self.{meta} }}
    fn save_state(&self, s: &mut ::dryml::objects::State) -> ::std::result::Result<(), ::dryml::objects::ObjectError> {{
        <{ty} as ::dryml::objects::Build>::save_state(self, s)
    }}
    fn load_state(&mut self, s: &::dryml::objects::State) -> ::std::result::Result<(), ::dryml::objects::ObjectError> {{
        <{ty} as ::dryml::objects::Build>::load_state(self, s)
    }}
    fn load_compute(&mut self) -> ::std::result::Result<(), ::dryml::objects::ObjectError> {{
        <Self as ::dryml::objects::Build>::load_compute(self)
    }}
    fn save_compute(&mut self) -> ::std::result::Result<(), ::dryml::objects::ObjectError> {{
        <Self as ::dryml::objects::Build>::save_compute(self)
    }}
    fn as_any(&self) -> &dyn ::std::any::Any {{ self }}
    fn as_any_mut(&mut self) -> &mut dyn ::std::any::Any {{ self }}
    fn into_any(self: ::std::boxed::Box<Self>) -> ::std::boxed::Box<dyn ::std::any::Any> {{ self }}
}}
const _: () = {{
    extern "C" fn register() {{ ::dryml::objects::register::<{ty}>({registered}); }}
    // Runs when the program or the notebook cell holding the type is loaded.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static REGISTER: extern "C" fn() = register;
}};
"#
    ))
}

enum Attr {
    /// `#[dryml(name = "...")]`, with the quotes.
    Name(String),
    /// `#[dryml(args)]` or `#[dryml(meta)]`.
    Role(String),
}

/// A `dryml(...)` attribute, if this attribute is one.
fn attr(attr: TokenStream) -> Result<Option<Attr>, String> {
    let t: Vec<TokenTree> = attr.into_iter().collect();
    match t.as_slice() {
        [TokenTree::Ident(d), TokenTree::Group(g)]
            if d.to_string() == "dryml" && g.delimiter() == Delimiter::Parenthesis =>
        {
            let inner: Vec<TokenTree> = g.stream().into_iter().collect();
            match inner.as_slice() {
                [TokenTree::Ident(k), TokenTree::Punct(eq), TokenTree::Literal(lit)]
                    if k.to_string() == "name" && eq.as_char() == '=' && lit.to_string().starts_with('"') =>
                {
                    Ok(Some(Attr::Name(lit.to_string())))
                }
                [TokenTree::Ident(k)] if matches!(k.to_string().as_str(), "args" | "meta") => Ok(Some(Attr::Role(k.to_string()))),
                _ => Err("expected #[dryml(name = \"registered.Name\")] on the struct, or #[dryml(args)] / #[dryml(meta)] on a field".into()),
            }
        }
        _ => Ok(None),
    }
}

/// The fields holding the arguments and the identity: marked, or named `args` and `meta`.
fn roles(fields: TokenStream) -> Result<(String, String), String> {
    let t: Vec<TokenTree> = fields.into_iter().collect();
    let mut names = Vec::new();
    let mut marked: Vec<(String, String)> = Vec::new();
    let mut pending: Option<String> = None;
    let mut at_start = true;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = t.get(i + 1) {
                    if let Some(Attr::Role(r)) = attr(g.stream())? {
                        pending = Some(r);
                    }
                }
                i += 2;
                continue;
            }
            TokenTree::Punct(p) if p.as_char() == ',' => at_start = true,
            TokenTree::Ident(id) if at_start && id.to_string() == "pub" => {}
            TokenTree::Group(g) if at_start && g.delimiter() == Delimiter::Parenthesis => {}
            TokenTree::Ident(id) if at_start => {
                // A field name is followed by a lone `:`; commas inside `<...>` are skipped by
                // requiring that.
                if matches!(t.get(i + 1), Some(TokenTree::Punct(c)) if c.as_char() == ':' && c.spacing() == proc_macro::Spacing::Alone)
                {
                    let name = id.to_string();
                    if let Some(r) = pending.take() {
                        marked.push((r, name.clone()));
                    }
                    names.push(name);
                }
                at_start = false;
            }
            _ => at_start = false,
        }
        i += 1;
    }
    let pick = |role: &str| -> Result<String, String> {
        if let Some((_, f)) = marked.iter().find(|(r, _)| r == role) {
            return Ok(f.clone());
        }
        if names.iter().any(|n| n == role) {
            return Ok(role.to_string());
        }
        Err(format!("#[derive(dryml::Object)]: no `{role}` field; name one `{role}` or mark it #[dryml({role})]"))
    };
    Ok((pick("args")?, pick("meta")?))
}

//! `#[derive(dryml::Object)]`: implements `dryml::object::Object` for a type that implements
//! `dryml::object::Build`, and registers it under its name when its code is loaded.
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
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            // `#[dryml(name = "...")]`
            TokenTree::Punct(p) if p.as_char() == '#' => {
                if let Some(TokenTree::Group(g)) = tokens.get(i + 1) {
                    if let Some(n) = attr_name(g.stream())? {
                        registered = Some(n);
                    }
                }
                i += 2;
                continue;
            }
            TokenTree::Ident(id) if matches!(id.to_string().as_str(), "struct" | "enum") => {
                match tokens.get(i + 1) {
                    Some(TokenTree::Ident(n)) => name = Some(n.to_string()),
                    _ => return Err("#[derive(dryml::Object)]: expected a type name".into()),
                }
                if let Some(TokenTree::Punct(p)) = tokens.get(i + 2) {
                    if p.as_char() == '<' {
                        return Err("#[derive(dryml::Object)] does not take generic types: a registered type needs one name".into());
                    }
                }
                break;
            }
            _ => {}
        }
        i += 1;
    }
    let ty = name.ok_or("#[derive(dryml::Object)] applies to a struct or an enum")?;
    let registered = registered.unwrap_or_else(|| format!("{ty:?}"));
    Ok(format!(
        r#"
impl ::dryml::object::Object for {ty} {{
    fn type_name(&self) -> &'static str {{ {registered} }}
    fn definition(&self) -> ::dryml::object::ObjectDef {{
        ::dryml::object::ObjectDef::new({registered}, <{ty} as ::dryml::object::Build>::args(self))
            .expect("the arguments serialized when the object was built")
    }}
    fn meta(&self) -> &::dryml::object::Meta {{ <{ty} as ::dryml::object::Build>::meta(self) }}
    fn meta_mut(&mut self) -> &mut ::dryml::object::Meta {{ <{ty} as ::dryml::object::Build>::meta_mut(self) }}
    fn save_state(&self, s: &mut ::dryml::object::State) -> ::std::result::Result<(), ::dryml::object::ObjectError> {{
        <{ty} as ::dryml::object::Build>::save_state(self, s)
    }}
    fn load_state(&mut self, s: &::dryml::object::State) -> ::std::result::Result<(), ::dryml::object::ObjectError> {{
        <{ty} as ::dryml::object::Build>::load_state(self, s)
    }}
    fn as_any(&self) -> &dyn ::std::any::Any {{ self }}
    fn as_any_mut(&mut self) -> &mut dyn ::std::any::Any {{ self }}
    fn into_any(self: ::std::boxed::Box<Self>) -> ::std::boxed::Box<dyn ::std::any::Any> {{ self }}
}}
const _: () = {{
    extern "C" fn register() {{ ::dryml::object::register::<{ty}>({registered}); }}
    // Runs when the program or the notebook cell holding the type is loaded.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static REGISTER: extern "C" fn() = register;
}};
"#
    ))
}

/// The `"..."` of `dryml(name = "...")`, if this attribute is one.
fn attr_name(attr: TokenStream) -> Result<Option<String>, String> {
    let t: Vec<TokenTree> = attr.into_iter().collect();
    match t.as_slice() {
        [TokenTree::Ident(d), TokenTree::Group(g)] if d.to_string() == "dryml" && g.delimiter() == Delimiter::Parenthesis => {
            let inner: Vec<TokenTree> = g.stream().into_iter().collect();
            match inner.as_slice() {
                [TokenTree::Ident(k), TokenTree::Punct(eq), TokenTree::Literal(lit)]
                    if k.to_string() == "name" && eq.as_char() == '=' && lit.to_string().starts_with('"') =>
                {
                    Ok(Some(lit.to_string()))
                }
                _ => Err("expected #[dryml(name = \"registered.Name\")]".into()),
            }
        }
        _ => Ok(None),
    }
}

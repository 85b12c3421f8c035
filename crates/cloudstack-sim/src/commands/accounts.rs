//! `listAccounts`: the accounts a caller may see.
//!
//! Scoped as `AccountManagerImpl.buildACLSearchParameters` scopes lists: a caller that is
//! not a root admin sees its own account only; a root admin sees its own account too,
//! unless it asks with `listall=true` or names an `id`; then `name` filters. The
//! `AccountResponse` carries the account's id, name, type (0 user, 1 admin), role type,
//! domain and state, never a key.

use super::{Ctx, resolve};
use crate::error::ApiError;
use crate::response::list_body;
use crate::scenario::Role;
use serde_json::{Value, json};

/// listAccounts.
pub fn list_accounts(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.accounts.iter().any(|a| a.id == i))?;
    let items = state
        .accounts
        .iter()
        .filter(|a| {
            a.name == ctx.caller.account
                || ctx.caller.is_admin() && (p.bool("listall") == Some(true) || id.is_some())
        })
        .filter(|a| id.is_none_or(|i| i == a.id))
        .filter(|a| p.text("name").is_none_or(|n| n == a.name))
        .map(|a| {
            let (account_type, role_type) = match a.role {
                Role::Admin => (1, "Admin"),
                Role::User => (0, "User"),
            };
            json!({
                "id": a.id, "name": a.name, "accounttype": account_type, "roletype": role_type,
                "domainid": state.domain_id, "domain": "ROOT", "domainpath": "ROOT",
                "state": "enabled", "isdefault": false,
            })
        })
        .collect();
    Ok(list_body("account", items, page))
}

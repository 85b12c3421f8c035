//! `listAccounts`: the accounts a caller may see.
//!
//! `QueryManagerImpl.searchForAccountsInternal`: a caller that is not a root admin sees its
//! own account only (the account id is forced to the caller's); a root admin sees every
//! account, filtered by `id` and `name`. The `AccountResponse` carries the account's id,
//! name, type (0 user, 1 admin), role type, domain and state, never a key.

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
        .filter(|a| ctx.caller.is_admin() || a.name == ctx.caller.account)
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

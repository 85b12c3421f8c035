//! `listAccounts`: the accounts a caller may see.
//!
//! `QueryManagerImpl.searchForAccounts` → `searchForAccountsInternal` (4.22:
//! `AccountQueryServiceImpl.searchForAccountIdsAndCount`):
//! * without `id`, an admin with `listall=true` gets every account of its domain tree;
//!   anyone else — a user whatever it asks, an admin without `listall` and without
//!   `domainid` — gets its own account only, and `name` just narrows that (a user's
//!   `name=<another account>` is an empty list, no error);
//! * with `id`, the account must exist ("Unable to find account by id …", 431) and
//!   `accountMgr.checkAccess(caller, null, true, account)` must let the caller at it: a user
//!   naming another account is a `PermissionDeniedException`, 531 cs 4365 — not an empty
//!   list.
//!
//! The `AccountResponse` (`AccountJoinDaoImpl.newAccountResponse`) carries the account's
//! id, name, type (0 user, 1 admin), role type, domain and state, and its `user` list
//! (`ViewResponseHelper.createUserResponse` of the account's users: the simulator's one
//! user per account, named as the account). Never a key: the simulator leaves out the
//! user's `apikey`, which the server shows to those who may list the account.

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
    if let Some(target) = id.and_then(|i| state.accounts.iter().find(|a| a.id == i))
        && !ctx.caller.is_admin()
        && target.name != ctx.caller.account
    {
        // `checkAccess(caller, null, true, account)` → `DomainChecker.checkAccess`.
        return Err(ApiError::denied(format!(
            "Account {} does not have permission to operate with resource {}",
            ctx.caller.account, target.name
        )));
    }
    // An admin naming a `domainid` (the simulator's one domain) lists that domain's accounts.
    let domain = resolve(p, "domainid", |d| d == state.domain_id)?;
    let every_account = ctx.caller.is_admin()
        && (p.bool("listall") == Some(true) || id.is_some() || domain.is_some());
    let items = state
        .accounts
        .iter()
        .filter(|a| a.name == ctx.caller.account || every_account)
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
                "user": [{
                    "id": a.user_id, "username": a.name, "account": a.name,
                    "accountid": a.id, "accounttype": account_type, "roletype": role_type,
                    "domainid": state.domain_id, "domain": "ROOT", "state": "enabled",
                    "isdefault": false,
                }],
            })
        })
        .collect();
    Ok(list_body("account", items, page))
}

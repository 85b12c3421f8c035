//! Who may see and change what: which commands an account's role may call (the rules of
//! [`crate::roles`]) and the 432 of a refusal, list scoping (`listall`, `projectid`,
//! `account`) and ownership checks, plus the owner fields every response carries.

use crate::error::ApiError;
use crate::params::Params;
use crate::scenario::Role;
use crate::state::{Account, Owner, State};
use crate::version::Version;
use serde_json::{Map, Value, json};

/// Whether `account` may call `command` (`DynamicRoleBasedAPIAccessChecker.checkAccess`):
/// its custom role's rules, or the default role of its type.
pub fn may_call(account: &Account, command: &super::Command) -> bool {
    match &account.custom_role {
        Some(role) => role.allows(command.name, command.authorized),
        None => match account.role {
            Role::Admin => true,
            Role::User => !command.admin_only,
        },
    }
}

/// The 432 of a command the caller's role refuses (`UnavailableCommandException` from
/// `DynamicRoleBasedAPIAccessChecker.checkAccess`, `ApiErrorCode.UNSUPPORTED_ACTION_ERROR`,
/// `cserrorcode` 9999). Up to 4.22 the text names the user's uuid; from 4.23 the account.
pub fn refusal(version: &Version, command: &str, account: &Account) -> ApiError {
    let text = if version.at_least(4, 23) {
        format!(
            "The API [{command}] does not exist or is not available for the account {}.",
            account.name
        )
    } else {
        format!(
            "The API [{command}] does not exist or is not available for the account for user id [{}].",
            account.user_id
        )
    };
    ApiError::new(432, Some(9999), text)
}

/// The 432 of a request whose `projectid` names a project the caller is not a member of
/// (the project access check of `checkCommandAvailable`, before the signature).
pub fn project_refusal(command: &str, project_id: &str) -> ApiError {
    ApiError::new(
        432,
        Some(9999),
        format!(
            "The API [{command}] does not exist or is not available for this account/user in project [{project_id}]."
        ),
    )
}

/// The authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    /// Account name.
    pub account: String,
    /// Role.
    pub role: Role,
}

impl Caller {
    /// Root admin.
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// May act on resources of `owner`.
    pub fn can_access(&self, state: &State, owner: &Owner) -> bool {
        self.is_admin()
            || match owner {
                Owner::Account(name) => name == &self.account,
                Owner::Project(id) => state
                    .project(id)
                    .is_some_and(|p| p.members.contains(&self.account)),
            }
    }

    /// Fails with 531 unless the caller may act on `owner`'s resource `what`.
    pub fn check(&self, state: &State, owner: &Owner, what: &str) -> Result<(), ApiError> {
        if self.can_access(state, owner) {
            Ok(())
        } else {
            Err(ApiError::denied(format!(
                "Account {} does not have permission to operate on {what}",
                self.account
            )))
        }
    }

    /// The owner of a resource created by this call (`projectid` given → the project).
    pub fn owner_for_create(&self, state: &State, params: &Params) -> Result<Owner, ApiError> {
        match params.uuid("projectid")? {
            None => Ok(Owner::Account(self.account.clone())),
            Some(id) => {
                let project = state
                    .project(id)
                    .ok_or_else(|| ApiError::invalid_uuid(&params.command, "projectid", id))?;
                let owner = Owner::Project(project.id.clone());
                self.check(state, &owner, &format!("project {}", project.name))?;
                Ok(owner)
            }
        }
    }
}

/// Which owners a list call returns (`AccountManagerImpl.buildACLSearchParameters`):
/// * `projectid=<id>`: that project's resources only; `projectid=-1`: every project the
///   caller belongs to (all projects for an admin).
/// * otherwise a normal user gets their own account's resources, whatever `id`, `listall`
///   or `account` say — project-owned ones never (`ListProjectResourcesCriteria
///   .SkipProjectResources` when no `id` is given, the caller's account as the only
///   permitted account either way);
/// * a root admin gets `account=<name>`'s, everybody's with `listall=true` (projects
///   skipped), or — with an `id` and neither `listall` nor `account` — the resource
///   whoever owns it, project included (no permitted account, no project criteria).
#[derive(Clone, Debug)]
pub struct Scope {
    all_accounts: bool,
    all_projects: bool,
    accounts: Vec<String>,
    projects: Vec<String>,
}

impl Scope {
    /// Builds the scope of a list call from `projectid`, `listall` and `account`.
    pub fn of(state: &State, caller: &Caller, params: &Params) -> Result<Self, ApiError> {
        let none = Self {
            all_accounts: false,
            all_projects: false,
            accounts: vec![],
            projects: vec![],
        };
        if let Some(project) = params.text("projectid") {
            let projects: Vec<String> = if project == "-1" {
                state
                    .projects
                    .iter()
                    .filter(|p| caller.is_admin() || p.members.contains(&caller.account))
                    .map(|p| p.id.clone())
                    .collect()
            } else {
                let id = params.required_uuid("projectid")?;
                let p = state
                    .project(id)
                    .ok_or_else(|| ApiError::invalid_uuid(&params.command, "projectid", id))?;
                caller.check(
                    state,
                    &Owner::Project(p.id.clone()),
                    &format!("project {}", p.name),
                )?;
                vec![p.id.clone()]
            };
            return Ok(Self { projects, ..none });
        }
        if caller.is_admin() {
            if let Some(account) = params.text("account") {
                return Ok(Self {
                    accounts: vec![account.to_owned()],
                    ..none
                });
            }
            if params.bool("listall") == Some(true) {
                return Ok(Self {
                    all_accounts: true,
                    ..none
                });
            }
            if params.text("id").is_some() {
                return Ok(Self {
                    all_accounts: true,
                    all_projects: true,
                    ..none
                });
            }
        }
        Ok(Self {
            accounts: vec![caller.account.clone()],
            ..none
        })
    }

    /// True when a resource of `owner` is in scope.
    pub fn matches(&self, owner: &Owner) -> bool {
        match owner {
            Owner::Account(name) => self.all_accounts || self.accounts.contains(name),
            Owner::Project(id) => self.all_projects || self.projects.contains(id),
        }
    }

    /// The same scope without the admin's by-id view of project resources, for lists that
    /// skip project resources unless `projectid` is given whatever the caller
    /// (`NetworkServiceImpl.searchForNetworks`: `skipProjectNetworks`).
    pub fn skipping_projects(self) -> Self {
        Self {
            all_projects: false,
            ..self
        }
    }
}

/// `account`, `domainid`, `domain` and, for project resources, `project`/`projectid`.
pub fn owner_fields(state: &State, owner: &Owner, out: &mut Map<String, Value>) {
    out.insert("domainid".into(), json!(state.domain_id));
    out.insert("domain".into(), json!("ROOT"));
    out.insert("domainpath".into(), json!("ROOT"));
    match owner {
        Owner::Account(name) => {
            out.insert("account".into(), json!(name));
        }
        Owner::Project(id) => {
            let name = state
                .project(id)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            out.insert("account".into(), json!(format!("PrjAcct-{name}-1")));
            out.insert("project".into(), json!(name));
            out.insert("projectid".into(), json!(id));
        }
    }
}

/// `ApiResponseHelper.populateOwner(ControlledEntityResponse, …)`, unlike [`owner_fields`]
/// (the views'): a project's resource shows `projectid`/`project` and no `account`; then
/// `domainid`, `domain`, `domainpath`.
pub fn entity_owner_fields(state: &State, owner: &Owner, out: &mut Map<String, Value>) {
    match owner {
        Owner::Account(name) => {
            out.insert("account".into(), json!(name));
        }
        Owner::Project(id) => {
            let name = state
                .project(id)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            out.insert("projectid".into(), json!(id));
            out.insert("project".into(), json!(name));
        }
    }
    out.insert("domainid".into(), json!(state.domain_id));
    out.insert("domain".into(), json!("ROOT"));
    out.insert("domainpath".into(), json!("ROOT"));
}

/// The 530 a job reports for a `PermissionDeniedException` (`ApiAsyncJobDispatcher.runJob`:
/// not a `ServerApiException`, so `INTERNAL_ERROR` with the exception's message).
pub fn job_denied(caller: &Caller, what: &str) -> ApiError {
    ApiError::new(
        530,
        None,
        format!(
            "Account {} does not have permission to operate on {what}",
            caller.account
        ),
    )
}

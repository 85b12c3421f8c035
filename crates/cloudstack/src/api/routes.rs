//! VPC static routes.

use crate::requests::{CreateStaticRoute, DeleteStaticRoute, ListStaticRoutes};
use crate::types::StaticRoute;
use crate::{AsyncStart, Client, Error};

impl Client {
    /// `listStaticRoutes`, all pages.
    pub async fn list_static_routes(
        &self,
        request: &ListStaticRoutes,
    ) -> Result<Vec<StaticRoute>, Error> {
        self.list_request(request, "staticroute").await
    }

    /// `createStaticRoute`: returns the route once the job finished.
    pub async fn create_static_route(
        &self,
        request: &CreateStaticRoute,
    ) -> Result<StaticRoute, Error> {
        self.create_request(request, "staticroute").await
    }

    /// `createStaticRoute` without waiting.
    pub async fn create_static_route_begin(
        &self,
        request: &CreateStaticRoute,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// `deleteStaticRoute`.
    pub async fn delete_static_route(&self, request: &DeleteStaticRoute) -> Result<(), Error> {
        self.run_request(request).await
    }
}

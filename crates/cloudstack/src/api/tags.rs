//! Resource tags.

use crate::requests::{CreateTags, DeleteTags, ListTags};
use crate::types::Tag;
use crate::{Client, Error};

impl Client {
    /// `createTags`.
    pub async fn create_tags(&self, request: &CreateTags) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `deleteTags`.
    pub async fn delete_tags(&self, request: &DeleteTags) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `listTags`, all pages.
    pub async fn list_tags(&self, request: &ListTags) -> Result<Vec<Tag>, Error> {
        self.list_request(request, "tag").await
    }
}

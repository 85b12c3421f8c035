//! `list_all` against a server that pages like BaseListCmd.

use crate::support;

use cloudstack::{Params, VirtualMachine, requests::ListVirtualMachines};
use serde_json::{Value, json};
use support::{TestServer, envelope};

/// Serves `total` VMs in pages, with `{"count":N}` and no items past the end and `{}` when
/// there are none.
fn paging_server(total: usize) -> impl Fn(&support::Recorded, usize) -> (u16, Value) {
    move |request, _| {
        let page: usize = request.params["page"].parse().unwrap();
        let size: usize = request.params["pagesize"].parse().unwrap();
        assert_eq!(size, 500, "the client always asks for 500 items per page");
        let start = size * (page - 1);
        let items: Vec<Value> = (start..total.min(start + size))
            .map(|i| json!({"id": format!("vm-{i}"), "name": format!("node-{i}")}))
            .collect();
        let inner = match (total, items.is_empty()) {
            (0, _) => json!({}),
            (_, true) => json!({"count": total}),
            _ => json!({"count": total, "virtualmachine": items}),
        };
        envelope("listVirtualMachines", inner)
    }
}

#[tokio::test]
async fn walks_three_pages_until_count_is_reached() {
    let server = TestServer::start(paging_server(1234)).await;
    let request = ListVirtualMachines {
        listall: Some(true),
        details: vec!["min".into(), "nics".into()],
        ..Default::default()
    };
    let vms = server
        .client()
        .list_virtual_machines(&request)
        .await
        .unwrap();
    assert_eq!(vms.len(), 1234);
    assert_eq!(vms[0].id.as_deref(), Some("vm-0"));
    assert_eq!(vms[1233].name.as_deref(), Some("node-1233"));
    let requests = server.requests_of("listVirtualMachines");
    let pages: Vec<&str> = requests.iter().map(|r| r.params["page"].as_str()).collect();
    assert_eq!(pages, ["1", "2", "3"]);
    assert!(requests.iter().all(|r| r.method == "GET"));
    assert!(
        requests
            .iter()
            .all(|r| r.params["details"] == "min,nics" && r.params["listall"] == "true")
    );
}

#[tokio::test]
async fn exact_multiple_of_page_size_stops_at_count() {
    let server = TestServer::start(paging_server(1000)).await;
    let vms: Vec<VirtualMachine> = server
        .client()
        .list_all("listVirtualMachines", "virtualmachine", Params::new())
        .await
        .unwrap();
    assert_eq!(vms.len(), 1000);
    assert_eq!(server.requests_of("listVirtualMachines").len(), 2);
}

#[tokio::test]
async fn empty_list_is_an_empty_object() {
    let server = TestServer::start(paging_server(0)).await;
    let vms = server
        .client()
        .list_virtual_machines(&ListVirtualMachines::default())
        .await
        .unwrap();
    assert!(vms.is_empty());
    assert_eq!(server.requests_of("listVirtualMachines").len(), 1);
}

#[tokio::test]
async fn a_page_without_items_ends_the_walk_even_if_count_is_larger() {
    // The count says 900 but the second page is empty (items vanished between pages).
    let server = TestServer::start(|request, _| {
        let inner = if request.params["page"] == "1" {
            json!({"count": 900, "virtualmachine": (0..500).map(|i| json!({"id": i})).collect::<Vec<_>>()})
        } else {
            json!({"count": 900})
        };
        envelope("listVirtualMachines", inner)
    })
    .await;
    let vms = server
        .client()
        .list_virtual_machines(&ListVirtualMachines::default())
        .await
        .unwrap();
    assert_eq!(vms.len(), 500);
    assert_eq!(
        vms[7].id.as_deref(),
        Some("7"),
        "numeric ids decode as strings"
    );
    assert_eq!(server.requests_of("listVirtualMachines").len(), 2);
}

#[tokio::test]
async fn a_mapped_list_keeps_what_it_keeps_and_still_stops_at_count() {
    let server = TestServer::start(paging_server(1234)).await;
    let names: Vec<String> = server
        .client()
        .list_all_mapped(
            "listVirtualMachines",
            "virtualmachine",
            Params::new(),
            |vm: VirtualMachine| vm.name.filter(|name| name.ends_with('0')),
        )
        .await
        .unwrap();
    assert_eq!(names.len(), 124, "one name in ten is kept");
    assert_eq!(names.first().map(String::as_str), Some("node-0"));
    assert_eq!(names.last().map(String::as_str), Some("node-1230"));
    let pages: Vec<String> = server
        .requests_of("listVirtualMachines")
        .iter()
        .map(|r| r.params["page"].clone())
        .collect();
    assert_eq!(pages, ["1", "2", "3"], "dropped items count towards count");
}

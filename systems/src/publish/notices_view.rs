//! The notifications the read side lists (`GET /v1/customers/notifications`, D4): every
//! notice in creation order, and newest-first indexes by broker and by customer, each also
//! per market, so every filter is one ordered set to page through.

use std::sync::Arc;

use bevy_ecs::prelude::{Res, ResMut};
use imbl::{OrdMap, OrdSet};
use perpsim_core::ids::{BrokerCode, CustomerCode};

use super::view::ReadView;
use crate::records::ids::NoticeSeq;
use crate::records::risk::Notification;
use crate::records::venue::MarketId;
use crate::risk::notices::Notifications;

/// A notification list's key: the notice's seq (lists page through it newest first).
pub type NoticeKey = NoticeSeq;

/// Who a notification list is for: a broker's customers or one customer, in every market or
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NoticeScope {
    Broker(BrokerCode, Option<MarketId>),
    Customer(CustomerCode, Option<MarketId>),
}

#[derive(Debug, Clone, Default)]
pub struct NoticesView {
    /// By `seq`: creation order, so creation times never decrease along it.
    pub all: imbl::Vector<Arc<Notification>>,
    pub index: OrdMap<NoticeScope, OrdSet<NoticeKey>>,
}

/// PublishSystems: the notices created since the last publish.
pub fn publish_notices(mut view: ResMut<ReadView>, log: Res<Notifications>) {
    let shown = view.notices.all.len();
    for n in log.0.iter().skip(shown) {
        let view = &mut view.notices;
        for market in [None, Some(n.market)] {
            for scope in [
                NoticeScope::Broker(n.broker, market),
                NoticeScope::Customer(n.customer, market),
            ] {
                view.index.entry(scope).or_default().insert(n.seq);
            }
        }
        view.all.push_back(Arc::clone(n));
    }
}

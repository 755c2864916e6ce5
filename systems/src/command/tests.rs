//! The journal's encoding of every command, pinned: a journal written by any earlier build
//! reads back as the same commands (append only, ARCHITECTURE.md), whatever shape the types
//! take in code.

use perpsim_core::Decimal;
use perpsim_core::clock::ClockMode;
use perpsim_core::entry::{Amend, OrderEntry};
use perpsim_core::ids::{BrokerCode, CustomerCode, MovementCode, PublicKey};
use perpsim_core::instrument::{Asset, InstrumentStatus};
use perpsim_core::limits::VenueLimits;
use perpsim_core::order::{OrderType, Side, TimeInForce, TriggerPriceType};
use perpsim_core::time::Timestamp;

use crate::command::{
    AddBrokerKey, AdvanceClock, AmendOrder, CancelOrder, CancelTransfer, CreateBroker,
    CreateCustomer, PlaceOrder, RequestTransfer, RevokeBrokerKey, SetClockMode, SetFaults, SetFees,
    SetFundingRate, SetInstrumentPrice, SetInstrumentStatus, SetLeverage, SetLimits,
    SetProvisioned, SetTransfersAvailable,
};
use crate::command::{Command, TransferKind};
use crate::records::fault_plan::{ChannelFault, ChannelFaultKind, FaultPlan, OrderEntryFault};

fn d(text: &str) -> Decimal {
    text.parse().unwrap()
}

fn entry() -> Box<OrderEntry> {
    Box::new(OrderEntry {
        side: Side::Sell,
        kind: OrderType::TakeProfitLimit,
        reference_id: "ref-1".into(),
        amount: Some(d("0.25")),
        cash_amount: None,
        limit_price: Some(d("101.5")),
        trigger_price: Some(d("100")),
        trigger_price_type: Some(TriggerPriceType::MarkPrice),
        take_profit_price: None,
        stop_loss_price: Some(d("90.125")),
        time_in_force: Some(TimeInForce::Gtd),
        expire_time: Some(Timestamp::from_millis(1_767_225_600_123)),
        post_only: true,
        leverage: Some(7),
        customer_ip: None,
    })
}

fn plan() -> FaultPlan {
    FaultPlan {
        seed: 42,
        channel: vec![ChannelFault {
            kind: ChannelFaultKind::Delay,
            connection: Some(3),
            topic: Some("orderbook-stream:BTC-USDC-PERP".into()),
            sequence: None,
            after: Some(Timestamp::from_millis(60_000)),
            count: 2,
            rate_ppm: 500_000,
            delay_ms: 250,
        }],
        order_entry: Some(OrderEntryFault {
            error_ppm: 1,
            delay_ppm: 2,
            delay_ms: 3,
        }),
    }
}

/// One command of every kind, in the order of their journal tags.
fn every_kind() -> Vec<Command> {
    let broker = BrokerCode::parse("00000000-0000-0000-0000-000000000102").unwrap();
    let customer = CustomerCode::parse("00000000-0000-0000-0000-000000000304").unwrap();
    let key = PublicKey([7; 32]);
    vec![
        Command::CreateBroker(CreateBroker {
            name: "Acme".into(),
            public_key: key,
        }),
        Command::AddBrokerKey(AddBrokerKey {
            broker,
            public_key: key,
        }),
        Command::RevokeBrokerKey(RevokeBrokerKey {
            broker,
            public_key: key,
        }),
        Command::CreateCustomer(CreateCustomer {
            broker,
            external_id: Some("ext".into()),
        }),
        Command::SetInstrumentStatus(SetInstrumentStatus {
            symbol: "BTC-USDC-PERP".into(),
            status: InstrumentStatus::PostOnly,
        }),
        Command::SetInstrumentPrice(SetInstrumentPrice {
            symbol: "BTC-USDC-PERP".into(),
            index_price: d("50000.5"),
            mark_price: d("50001"),
        }),
        Command::RequestTransfer(RequestTransfer {
            customer,
            kind: TransferKind::Withdrawal,
            asset: Asset::Usdt,
            amount: d("12.34"),
            delay_ms: 5_000,
        }),
        Command::CancelTransfer(CancelTransfer {
            code: MovementCode::parse("00000000-0000-0000-0000-000000000506").unwrap(),
        }),
        Command::SetTransfersAvailable(SetTransfersAvailable { available: false }),
        Command::SetProvisioned(SetProvisioned {
            customer,
            provisioned: true,
        }),
        Command::SetLeverage(SetLeverage {
            customer,
            leverage: 20,
        }),
        Command::SetFees(SetFees {
            customer,
            symbol: None,
            maker_bps: Some(d("-0.5")),
            taker_bps: None,
        }),
        Command::AdvanceClock(AdvanceClock {
            to: Timestamp::from_millis(86_400_000),
        }),
        Command::SetClockMode(SetClockMode {
            mode: ClockMode::Manual,
        }),
        Command::SetFundingRate(SetFundingRate {
            symbol: "ETH-USDT-PERP".into(),
            rate: d("0.0001"),
        }),
        Command::PlaceOrder(PlaceOrder {
            customer,
            symbol: "BTC-USDC-PERP".into(),
            entry: entry(),
        }),
        Command::CancelOrder(CancelOrder {
            customer,
            reference_id: "ref-1".into(),
        }),
        Command::AmendOrder(AmendOrder {
            customer,
            reference_id: "ref-1".into(),
            amend: Amend {
                amount: None,
                limit_price: Some(d("99")),
                trigger_price: None,
                expire_time: Some(Timestamp::from_millis(1)),
            },
        }),
        Command::SetLimits(SetLimits {
            limits: VenueLimits {
                max_open_orders: 10,
                max_customers: 20,
            },
        }),
        Command::SetFaults(SetFaults { plan: Some(plan()) }),
    ]
}

/// Each command's postcard encoding as journaled since its kind was added.
const JOURNALED: &str = "
000441636d650707070707070707070707070707070707070707070707070707070707070707
0110000000000000000000000000000001020707070707070707070707070707070707070707070707070707070707070707
0210000000000000000000000000000001020707070707070707070707070707070707070707070707070707070707070707
0310000000000000000000000000000001020103657874
040d4254432d555344432d5045525001
050d4254432d555344432d504552500000010025a1070000000000000000000000000051c300000000000000000000
061000000000000000000000000000000304010100000200d20400000000000000000000904e
071000000000000000000000000000000506
0800
09100000000000000000000000000000030401
0a100000000000000000000000000000030414
0b100000000000000000000000000000030400010000018005000000000000000000000000
0c80f0b252
0d01
0e0d4554482d555344542d5045525000000400010000000000000000000000
0f10000000000000000000000000000003040d4254432d555344432d504552500105057265662d310100000200190000000000000000000000000100000100f70300000000000000000000010000000064000000000000000000000001010001000003000d6001000000000000000000010301f6a1d5edee6601010700
101000000000000000000000000000000304057265662d31
111000000000000000000000000000000304057265662d31000100000000630000000000000000000000000102
120a14
13012a01020103011e6f72646572626f6f6b2d73747265616d3a4254432d555344432d504552500001c0a90702a0c21efa0101010203
";

#[test]
fn every_command_encodes_as_journaled_and_reads_back() {
    let commands = every_kind();
    let encoded: Vec<Vec<u8>> = commands
        .iter()
        .map(|c| postcard::to_stdvec(c).unwrap())
        .collect();
    let hex: Vec<String> = encoded.iter().map(|b| perpsim_core::ids::hex(b)).collect();
    assert_eq!(hex.join("\n"), JOURNALED.trim());
    for (command, bytes) in commands.iter().zip(&encoded) {
        let read: Command = postcard::from_bytes(bytes).unwrap();
        assert_eq!(&read, command);
    }
}

/// A replay binds a planned customer's command to its customer by its bytes
/// (`Command::encode_rebound`): for every kind that names a customer, the bytes of the command
/// planned for a placeholder, with the customer's put in, are the bound command's own encoding,
/// so the journal holds what encoding it whole would have written.
#[test]
fn a_customers_command_bound_by_its_bytes_encodes_as_the_bound_command() {
    let placeholder = CustomerCode(perpsim_core::Uuid::nil());
    let code = CustomerCode::parse("a1b2c3d4-0000-4000-8000-00000000beef").unwrap();
    let mut bound_kinds = 0;
    for command in every_kind() {
        let (mut planned, mut bound) = (command.clone(), command);
        let (Some(p), Some(b)) = (planned.customer_mut(), bound.customer_mut()) else {
            continue;
        };
        (*p, *b) = (placeholder, code);
        let encoded = postcard::to_stdvec(&planned).unwrap();
        let mut out = vec![9, 9];
        bound.encode_rebound(&encoded, code, &mut out);
        assert_eq!(out[..2], [9, 9], "appended after what the buffer held");
        assert_eq!(out[2..], postcard::to_stdvec(&bound).unwrap(), "{bound:?}");
        bound_kinds += 1;
    }
    assert_eq!(bound_kinds, 7, "every kind customer_mut names is drawn");
}

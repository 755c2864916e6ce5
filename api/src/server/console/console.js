// The venue console (issue 40): the market, the accounts and the venue as the channels and the
// admin API give them, and the operator's controls.
//
// Fed by two WebSockets to /v1/ws (the public topics; the margin topics of a broker key pasted
// into the page, which signs its `authenticate` in WebCrypto) and by polling the admin API with a
// pasted token, both kept in this page's memory only, never stored or sent elsewhere. Every
// collection the page keeps is bounded (BOUNDS): a page left open for days holds what it held
// after an hour. A closed channel reconnects after 0.5 s, doubling to 30 s while it fails.
// Money is shown as the frames write it; numbers are parsed only to draw and to sort.
"use strict";
(function () {
  const BOUNDS = {
    series: 2000, // points per chart line
    tape: 50, // trades on the tape
    events: 100, // margin state changes, liquidations and notices listed
    accounts: 1000, // customers followed (the first the margin channel names)
    shownAccounts: 50, // customers in the table, nearest to liquidation first
    strikes: 20, // the recovery report's latest strikes listed
    levels: 10, // book levels a side in the table
    bookLevels: 1000, // levels a side the local book holds before it resyncs
  };
  const POLL_MS = 2000;
  const RENDER_MS = 100;
  const stats = {
    bookFrames: 0, verified: 0, resyncs: 0, resubscribes: 0, depthDraws: 0, tapeTrades: 0,
    reconnects: 0, marginFrames: 0, polls: 0,
  };
  // What the tests read: the counters, the bounds, and how many points a chart line holds.
  window.perpsimConsole = { stats, BOUNDS, pricePoints: () => market.prices.data[0].length };

  const $ = (id) => document.getElementById(id);
  const num = (text) => (text === null || text === undefined ? null : Number(text));
  const seconds = (rfc3339) => Date.parse(rfc3339) / 1000;
  const shown = (text) => (text === null || text === undefined ? "–" : String(text));

  // ---- CRC-32 of the book's checksum (docs/websocket.md) ----
  const CRC_TABLE = (() => {
    const table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
    return table;
  })();
  function crc32(text) {
    let c = 0xffffffff;
    for (const b of new TextEncoder().encode(text)) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }

  // ---- the local book: the snapshot and the updates, proven by each frame's checksum ----
  class Book {
    constructor(snapshot) {
      this.bids = new Map(snapshot.bids.map((l) => [l.price, l.amount]));
      this.asks = new Map(snapshot.asks.map((l) => [l.price, l.amount]));
      this.sequence = snapshot.sequence;
    }
    apply(changes) {
      for (const c of changes) {
        const side = c.type === "bid" ? this.bids : this.asks;
        if (c.action === "delete") side.delete(c.price);
        else side.set(c.price, c.amount);
      }
    }
    best(bids, n) {
      const side = bids ? this.bids : this.asks;
      const order = bids ? (a, b) => num(b[0]) - num(a[0]) : (a, b) => num(a[0]) - num(b[0]);
      return [...side.entries()].sort(order).slice(0, n);
    }
    checksum() {
      const levels = this.best(false, 10).concat(this.best(true, 10));
      return crc32(levels.map(([p, a]) => p + ":" + a).join("|"));
    }
    tooLarge() {
      return this.bids.size > BOUNDS.bookLevels || this.asks.size > BOUNDS.bookLevels;
    }
  }

  // ---- a bounded line series for uPlot: columns of x and y values ----
  function series(lines) {
    const data = [[]];
    for (let i = 0; i < lines; i++) data.push([]);
    return {
      data,
      push(x, values) {
        const xs = data[0];
        if (xs.length && xs[xs.length - 1] === x) {
          values.forEach((v, i) => { data[i + 1][xs.length - 1] = v; });
          return;
        }
        xs.push(x);
        values.forEach((v, i) => data[i + 1].push(v));
        if (xs.length > BOUNDS.series) data.forEach((column) => column.shift());
      },
      clear() { data.forEach((column) => { column.length = 0; }); },
    };
  }

  function chart(target, title, yLabel, lines, time = true) {
    const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"];
    const opts = {
      title, width: 560, height: 220,
      scales: { x: { time } },
      series: [{ label: time ? "time (UTC)" : "price" }].concat(lines.map((l, i) =>
        Object.assign({ stroke: palette[i % palette.length], width: 1.5, points: { show: false },
          spanGaps: true }, l))),
      axes: [{ label: time ? "simulation time (UTC)" : "price" }, { label: yLabel, size: 70 }],
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    };
    return new uPlot(opts, [[]].concat(lines.map(() => [])), $(target));
  }

  // ---- a WebSocket to /v1/ws that reconnects with backoff ----
  function channel(name, onOpen, onFrame, statusId) {
    let socket = null;
    let delay = 500;
    let stopped = false;
    let timer = null;
    const conn = {
      send(op) { if (socket && socket.readyState === 1) socket.send(JSON.stringify(op)); },
      stop() { stopped = true; clearTimeout(timer); if (socket) socket.close(1000); },
    };
    const status = (text) => { $(statusId).textContent = name + ": " + text; };
    function connect() {
      socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") +
        location.host + "/v1/ws");
      socket.onopen = () => { status("open"); onOpen(conn); };
      socket.onmessage = (e) => { delay = 500; onFrame(JSON.parse(e.data), conn); };
      socket.onclose = (e) => {
        if (stopped) return;
        status("closed (" + e.code + " " + e.reason + "), reconnecting in " + delay + " ms");
        stats.reconnects++;
        timer = setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      };
    }
    connect();
    return conn;
  }

  // Renders at most every RENDER_MS: frames arrive faster than a screen needs them.
  function throttled(draw) {
    let due = false;
    return () => {
      if (due) return;
      due = true;
      setTimeout(() => { due = false; draw(); }, RENDER_MS);
    };
  }

  function fillTable(id, rows, cells, rowClass) {
    const body = $(id).tBodies[0];
    body.replaceChildren(...rows.map((row) => {
      const tr = document.createElement("tr");
      if (rowClass) tr.className = rowClass(row);
      for (const [text, cls, title] of cells(row)) {
        const td = document.createElement("td");
        td.textContent = shown(text);
        if (cls) td.className = cls;
        if (title) td.title = title;
        tr.appendChild(td);
      }
      return tr;
    }));
    return body;
  }

  // ================= the market =================
  const market = {
    symbol: null,
    tickers: new Map(),
    book: null,
    tape: [],
    prices: series(3),
    // The index drawn last, dashed, so it shows where the mark lies on it.
    priceChart: chart("price-chart", "Mark, last trade and index", "price", [
      { label: "mark" }, { label: "last trade" }, { label: "index", dash: [4, 4], width: 2 }]),
    depthChart: chart("depth-chart", "Depth", "cumulative amount", [
      { label: "bids", stroke: "#1a7f37", fill: "rgba(26,127,55,0.15)",
        paths: uPlot.paths.stepped({ align: -1 }) },
      { label: "asks", stroke: "#c62828", fill: "rgba(198,40,40,0.15)",
        paths: uPlot.paths.stepped({ align: 1 }) }], false),
  };
  const topics = () => ["orderbook-stream:" + market.symbol, "market-trades:" + market.symbol];

  function onTicker(t) {
    const fresh = !market.tickers.has(t.symbol);
    market.tickers.set(t.symbol, t);
    if (fresh) {
      const option = document.createElement("option");
      option.textContent = t.symbol;
      $("symbol").appendChild(option);
      if (market.symbol === null) selectSymbol(t.symbol);
    }
    if (!admin.token) $("clock").textContent = t.timestamp;
    if (t.symbol !== market.symbol) return;
    const fields = { "t-last": t.last_price, "t-mark": t.mark_price, "t-index": t.index_price,
      "t-bid": t.best_bid, "t-ask": t.best_ask, "t-funding": t.funding_rate,
      "t-predicted": t.predicted_rate, "t-next-funding": t.next_funding_time,
      "t-oi": t.open_interest };
    for (const [id, value] of Object.entries(fields)) $(id).textContent = shown(value);
    market.prices.push(seconds(t.timestamp), [num(t.mark_price), num(t.last_price),
      num(t.index_price)]);
    drawPrices();
  }
  const drawPrices = throttled(() => market.priceChart.setData(market.prices.data));

  function onBook(frame, conn) {
    stats.bookFrames++;
    let resync = null;
    if (frame.type === "snapshot") {
      market.book = new Book(frame);
      if (market.book.checksum() !== frame.checksum) resync = "the snapshot's checksum";
    } else if (market.book === null) {
      return;
    } else if (frame.sequence !== market.book.sequence + 1) {
      resync = "a gap after " + market.book.sequence;
    } else {
      market.book.apply(frame.changes);
      market.book.sequence = frame.sequence;
      if (market.book.checksum() !== frame.checksum) resync = "a checksum that did not match";
      else if (market.book.tooLarge()) resync = "more levels than the page keeps";
      else stats.verified++;
    }
    if (resync) return resyncBook(conn, resync);
    $("book-status").textContent = "sequence " + market.book.sequence + ", verified";
    drawBook();
  }

  function resyncBook(conn, why) {
    stats.resyncs++;
    market.book = null;
    $("book-status").textContent = "resyncing after " + why;
    conn.send({ op: "subscribe", args: [topics()[0]] });
  }

  const drawBook = throttled(() => {
    const book = market.book;
    if (!book) return;
    const bids = book.best(true, BOUNDS.levels);
    const asks = book.best(false, BOUNDS.levels);
    const rows = [];
    for (let i = 0; i < Math.max(bids.length, asks.length); i++) rows.push([bids[i], asks[i]]);
    fillTable("book", rows, ([b, a]) => [[b && b[1], "bid"], [b && b[0], "bid"],
      [a && a[0], "ask"], [a && a[1], "ask"]]);
    drawDepth(book.best(true, 50), book.best(false, 50));
  });

  // Depth: cumulative amounts from the best level outwards, bids left, asks right.
  function drawDepth(bids, asks) {
    const xs = [], bidSums = [], askSums = [];
    let sum = 0;
    const bidPoints = bids.map(([p, a]) => [num(p), (sum += num(a))]).reverse();
    sum = 0;
    const askPoints = asks.map(([p, a]) => [num(p), (sum += num(a))]);
    for (const [p, s] of bidPoints) { xs.push(p); bidSums.push(s); askSums.push(null); }
    for (const [p, s] of askPoints) { xs.push(p); bidSums.push(null); askSums.push(s); }
    market.depthChart.setData([xs, bidSums, askSums]);
    stats.depthDraws++;
  }

  function onTrade(trade) {
    if (trade.symbol !== market.symbol || market.tape.some((t) => t.code === trade.code)) return;
    stats.tapeTrades++;
    market.tape.unshift(trade);
    market.tape.length = Math.min(market.tape.length, BOUNDS.tape);
    drawTape();
  }
  const drawTape = throttled(() => fillTable("tape", market.tape, (t) => [
    [t.timestamp.slice(11, 23)], [t.taker_side, t.taker_side], [t.price], [t.amount]]));

  function selectSymbol(symbol) {
    const previous = market.symbol;
    market.symbol = symbol;
    $("symbol").value = symbol;
    market.book = null;
    market.tape = [];
    market.prices.clear();
    drawTape();
    if (previous !== null) {
      publicChannel.send({ op: "unsubscribe", args: ["orderbook-stream:" + previous,
        "market-trades:" + previous] });
    }
    publicChannel.send({ op: "subscribe", args: topics() });
  }

  // An error naming the book or the trades tore that topic down (§6 rule 7): subscribed
  // again, the book from a new snapshot.
  function onPublicFrame(frame, conn) {
    if (frame.op === "error") {
      $("public-status").textContent = "market channels: " + frame.code + " " + frame.message;
      if (market.symbol && frame.channel === topics()[0]) resyncBook(conn, "an upstream error");
      else if (market.symbol && frame.channel === topics()[1]) {
        stats.resubscribes++;
        conn.send({ op: "subscribe", args: [frame.channel] });
      }
      return;
    }
    if (frame.channel === "ticker") onTicker(frame.data);
    else if (market.symbol && frame.channel === topics()[0]) onBook(frame, conn);
    else if (market.symbol && frame.channel === topics()[1]) onTrade(frame.data);
  }

  const publicChannel = channel("market channels", (conn) => {
    market.book = null;
    conn.send({ op: "subscribe", args: market.symbol ? ["ticker"].concat(topics()) : ["ticker"] });
  }, onPublicFrame, "public-status");
  $("symbol").addEventListener("change", (e) => selectSymbol(e.target.value));

  // ================= the accounts of a broker key =================
  const accounts = { signer: null, conn: null, customers: new Map(), events: [],
    selected: null, positions: [] };

  // The channel's authenticate signs as the handshake's GET /v1/ws would (D2, ed25519_key.js).
  async function authenticateOp() {
    const { nonce, signature } = await accounts.signer.sign("GET", "/v1/ws", "");
    return { op: "authenticate", public_key: accounts.signer.publicKey, nonce, signature };
  }

  function onPrivateFrame(frame, conn) {
    if (frame.op === "authenticated") {
      $("private-status").textContent = "accounts: signed in as " + accounts.signer.publicKey;
      const args = ["margin", "liquidations", "notifications", "trades"];
      if (accounts.selected) args.push("positions:" + accounts.selected);
      return conn.send({ op: "subscribe", args });
    }
    if (frame.op === "error") {
      $("private-status").textContent = "accounts: " + frame.code + " " + frame.message;
      return;
    }
    if (frame.channel === "margin") onMargin(frame);
    else if (frame.channel === "liquidations") onStateChange(frame.data);
    else if (frame.channel === "notifications") onNotice(frame);
    else if (frame.channel === "trades" && frame.data.type !== "trade") onForcedFill(frame.data);
    else if (frame.channel === "positions:" + accounts.selected) {
      accounts.positions = frame.data;
      drawPositions();
    }
  }

  function follow(code) {
    if (!accounts.customers.has(code) && accounts.customers.size >= BOUNDS.accounts) return null;
    if (!accounts.customers.has(code)) accounts.customers.set(code, { customer_code: code });
    return accounts.customers.get(code);
  }

  // The figures as of the frame's valuation: a customer left with no open position gets no
  // more frames, so its row says when its figures were taken.
  function onMargin(frame) {
    stats.marginFrames++;
    const account = follow(frame.data.customer_code);
    if (account) Object.assign(account, frame.data, { as_of: frame.timestamp });
    drawAccounts();
  }

  function onStateChange(record) {
    const account = follow(record.customer_code);
    if (account) {
      account.margin_state = record.margin_state;
      account.leverage_ratio = record.leverage_ratio;
    }
    logEvent(record.margin_state, record.timestamp + " " + record.customer_code + " → " +
      record.margin_state + " (" + record.currency + ", leverage ratio " + record.leverage_ratio +
      (record.margin_deficit ? ", deficit " + record.margin_deficit : "") + ")");
    drawAccounts();
  }

  function onNotice(frame) {
    const d = frame.data;
    logEvent("notice", frame.timestamp + " " + frame.customer_code + " notice: " + d.symbol + " " +
      d.side + " " + d.amount + " down " + d.depreciation_pct + " % (threshold " +
      d.threshold_pct + " %)");
  }

  // A liquidation's fill, or an auto-deleveraging fill on either side of one.
  function onForcedFill(t) {
    logEvent("liquidation", t.timestamp + " " + t.customer_code + " " + t.type + ": " + t.side +
      " " + t.amount + " " + t.symbol + " at " + t.price + " (realised PnL " + t.realised_pnl +
      ")");
  }

  function logEvent(kind, text) {
    accounts.events.unshift({ kind, text });
    accounts.events.length = Math.min(accounts.events.length, BOUNDS.events);
    const items = accounts.events.map((e) => {
      const li = document.createElement("li");
      li.className = e.kind;
      li.textContent = e.text;
      return li;
    });
    $("events").replaceChildren(...items);
  }

  const drawAccounts = throttled(() => {
    const rows = [...accounts.customers.values()]
      .sort((a, b) => (num(a.leverage_ratio) ?? Infinity) - (num(b.leverage_ratio) ?? Infinity))
      .slice(0, BOUNDS.shownAccounts);
    // A code's first 8 characters, the whole code as the cell's title (and on click).
    const body = fillTable("customers", rows, (a) => [
      [a.customer_code.slice(0, 8) + "…", "code", a.customer_code],
      [a.total_equity], [a.available_margin], [a.leverage_ratio], [""],
      [a.margin_call_threshold], [a.liquidation_threshold], [a.margin_state, "state"],
      [a.as_of && a.as_of.slice(11, 19)]],
    (a) => (a.margin_state || "") + (a.customer_code === accounts.selected ? " selected" : ""));
    rows.forEach((a, i) => {
      const meter = document.createElement("meter");
      const call = num(a.margin_call_threshold) ?? 0.5;
      Object.assign(meter, { min: 0, max: Math.max(1, 2 * call), low: num(a.liquidation_threshold)
        ?? 0.3, high: call, optimum: 1, value: num(a.leverage_ratio) ?? 1 });
      const row = body.rows[i];
      row.cells[4].replaceChildren(meter);
      row.addEventListener("click", () => selectCustomer(a.customer_code));
    });
  });

  function selectCustomer(code) {
    const conn = accounts.conn;
    if (accounts.selected && conn) conn.send({ op: "unsubscribe",
      args: ["positions:" + accounts.selected] });
    accounts.selected = code;
    accounts.positions = [];
    $("positions-of").textContent = code;
    if (conn) conn.send({ op: "subscribe", args: ["positions:" + code] });
    drawPositions();
    drawAccounts();
  }

  const drawPositions = throttled(() => fillTable("positions", accounts.positions, (p) => [
    [p.symbol], [p.side, p.side === "long" ? "buy" : "sell"], [p.amount], [p.entry_price],
    [p.mark_price], [p.unrealised_pnl], [p.margin]]));

  $("use-key").addEventListener("click", async () => {
    const box = $("broker-key");
    try {
      accounts.signer = await perpsimImportKey(box.value); // ed25519_key.js
    } catch (e) {
      $("private-status").textContent = "accounts: not a PKCS#8 PEM ed25519 key (" + e + ")";
      return;
    } finally {
      box.value = "";
    }
    if (accounts.conn) accounts.conn.stop();
    accounts.customers.clear();
    accounts.conn = channel("accounts", async (conn) => conn.send(await authenticateOp()),
      onPrivateFrame, "private-status");
  });
  $("forget-key").addEventListener("click", () => {
    if (accounts.conn) accounts.conn.stop();
    Object.assign(accounts, { signer: null, conn: null, selected: null, positions: [] });
    accounts.customers.clear();
    drawAccounts();
    drawPositions();
    $("private-status").textContent = "no key";
  });

  // ================= the venue and the operator, with the admin token =================
  const admin = { token: null, venue: series(4), first: null, polling: false, lastTicks: null };
  const ACCOUNTS = ["fees", "clearing", "insurance", "market_maker"];
  admin.chart = chart("venue-chart", "Venue accounts: change since watched (USDC + USDT at par)",
    "change", ACCOUNTS.map((label) => ({ label })));

  async function adminCall(method, path, body) {
    const init = { method, headers: { Authorization: "Bearer " + admin.token } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch("/admin/v1" + path, init);
    const text = await response.text();
    const value = text ? JSON.parse(text) : null;
    if (!response.ok) {
      throw new Error("HTTP " + response.status + (value ? " " + value.code + ": " + value.message : ""));
    }
    return value;
  }

  async function poll() {
    if (admin.polling) return;
    admin.polling = true;
    try {
      await pollMetrics();
      if (admin.token) await pollAdmin();
      stats.polls++;
    } catch (e) {
      $("admin-status").textContent = "admin: " + e.message;
    } finally {
      admin.polling = false;
    }
  }

  async function pollMetrics() {
    const text = await (await fetch("/metrics")).text();
    const metric = (name) => {
      const m = text.match(new RegExp("^" + name + " (\\S+)$", "m"));
      return m ? Number(m[1]) : null;
    };
    const ticks = metric("perpsim_engine_ticks_total");
    const now = performance.now() / 1000;
    if (admin.lastTicks && ticks !== null) {
      const rate = (ticks - admin.lastTicks[0]) / (now - admin.lastTicks[1]);
      $("m-tick-rate").textContent = rate.toFixed(1);
    }
    admin.lastTicks = ticks === null ? null : [ticks, now];
    $("m-ticks").textContent = shown(ticks);
    $("m-journal-lag").textContent = shown(metric("perpsim_journal_lag_ticks"));
  }

  async function pollAdmin() {
    const clock = await adminCall("GET", "/clock");
    $("clock").textContent = clock.now;
    $("clock-mode").textContent = clock.mode + " clock";
    const rows = await adminCall("GET", "/venue/accounts");
    fillTable("venue-accounts", rows, (r) => [[r.account], [r.asset], [r.total]]);
    const totals = ACCOUNTS.map((a) => rows.filter((r) => r.account === a)
      .reduce((s, r) => s + num(r.total), 0));
    if (!admin.first) admin.first = totals;
    admin.venue.push(seconds(clock.now), totals.map((t, i) => t - admin.first[i]));
    admin.chart.setData(admin.venue.data);
    const faults = await adminCall("GET", "/faults");
    $("faults-active").textContent = faults.active ? "faults on" : "faults off";
    drawReport(await adminCall("GET", "/faults/report"));
    $("admin-status").textContent = "admin: token in use";
  }

  function drawReport(report) {
    $("report-totals").textContent = "injected " + report.injected + ", recovered " +
      report.recovered + ", unrecovered " + report.unrecovered + ", not observable " +
      report.not_observable;
    const strikes = [];
    for (const c of report.connections) for (const s of c.strikes) strikes.push([c, s]);
    strikes.sort((a, b) => b[1].injected_at_ms - a[1].injected_at_ms);
    fillTable("strikes", strikes.slice(0, BOUNDS.strikes), ([c, s]) => [[c.connection],
      [s.kind], [s.topic], [s.sequence], [s.recovered || "not yet"], [s.recovered_after_ms]]);
  }

  setInterval(poll, POLL_MS);
  poll();

  $("use-token").addEventListener("click", () => {
    admin.token = $("admin-token").value.trim() || null;
    $("admin-token").value = "";
    admin.first = null;
    admin.venue.clear();
    $("admin-status").textContent = admin.token ? "admin: checking the token" : "no token";
    poll();
  });
  $("forget-token").addEventListener("click", () => {
    admin.token = null;
    $("admin-status").textContent = "no token";
  });

  // Each control sends one admin request and shows its answer.
  function control(button, request) {
    $(button).addEventListener("click", async () => {
      const result = $("operator-result");
      if (!admin.token) {
        result.textContent = "paste the admin token first";
        return;
      }
      try {
        const [method, path, body] = request();
        await adminCall(method, path, body);
        result.textContent = button + ": done";
        poll();
      } catch (e) {
        result.textContent = button + ": " + e.message;
      }
    });
  }
  const symbolPath = () => "/instruments/" + encodeURIComponent(market.symbol);
  control("advance", () => ["POST", "/clock/advance",
    { seconds: Number($("advance-seconds").value) }]);
  control("run-to", () => ["POST", "/clock/advance", { to: $("advance-to").value.trim() }]);
  control("set-price", () => {
    const body = { index_price: $("price-index").value.trim() };
    const mark = $("price-mark").value.trim();
    if (mark) body.mark_price = mark;
    return ["PUT", symbolPath() + "/price", body];
  });
  control("set-funding", () => ["PUT", symbolPath() + "/funding",
    { preliminary_rate: $("funding-rate").value.trim() }]);
  control("set-status", () => ["PUT", symbolPath() + "/status",
    { status: $("status-value").value }]);
  control("set-faults", () => ["PUT", "/faults", JSON.parse($("fault-plan").value)]);
  control("clear-faults", () => ["DELETE", "/faults"]);
})();

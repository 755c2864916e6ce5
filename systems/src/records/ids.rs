//! The engine's sequence ids: dense counters, each its own type so one cannot stand for
//! another. Each is the position of its record in its log (or, for an order, the count of
//! orders accepted before it); all only grow.

//! The filter chain.

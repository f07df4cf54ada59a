pub mod bipartition;

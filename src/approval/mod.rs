pub mod links;

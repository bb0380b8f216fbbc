//! How a setting is declared: once, as a field of its owner's struct, which is at the same time
//! the flag (clap `long`), the environment variable (clap `env = "KUBEMEDIC_…"`) and the file
//! key (serde, kebab-case: the long flag's name). Its default is a constant that the help text
//! shows (`help_default = CONST`) and the code applies (`.unwrap_or(CONST)`).
//!
//! Precedence: clap gives the flag over the environment; [`Layered::fill_from`] then fills what
//! neither set from the config file; the owner's `settings()` applies the defaults and checks.
//! The tests below hold the convention the error messages and the reference rely on: every
//! flag has its `KUBEMEDIC_` variable and its file key of the same name.

use std::fmt::Display;

use serde::de::{Deserialize, Deserializer, Error as _, Visitor};

/// Declares one owner's settings: the struct as written, plus `Clone`, `Default`, the clap
/// [`clap::Args`] and serde `Deserialize` forms (kebab-case keys, absent keys unset), and its
/// [`Layered`] fill from the file. Fields are `Option<T>` (unset unless given) or `bool`
/// (a switch: on if any layer turns it on).
macro_rules! settings {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, clap::Args, serde::Deserialize)]
        #[serde(rename_all = "kebab-case", default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::config::declare::Layered for $name {
            fn fill_from(&mut self, file: Self) {
                $( $crate::config::declare::Fill::fill(&mut self.$field, file.$field); )*
            }
        }
    };
}
pub(crate) use settings;

/// An owner's settings that a lower layer (the config file) can complete.
pub trait Layered {
    /// Keep what is set; take the rest from `file`.
    fn fill_from(&mut self, file: Self);
}

/// One field's rule for [`Layered::fill_from`].
pub trait Fill {
    fn fill(&mut self, file: Self);
}

impl<T> Fill for Option<T> {
    fn fill(&mut self, file: Self) {
        if self.is_none() {
            *self = file;
        }
    }
}

impl Fill for bool {
    fn fill(&mut self, file: Self) {
        *self = *self || file;
    }
}

/// `#[arg(help_default = CONST)]`: the help ends with `[default: CONST]`, from the constant the
/// code applies, so the two cannot drift. (clap calls this after it set the doc comment.)
pub trait HelpDefault {
    fn help_default(self, value: impl Display) -> Self;
}

impl HelpDefault for clap::Arg {
    fn help_default(self, value: impl Display) -> Self {
        let shown = format!(" [default: {value}]");
        let help = self.get_help().map(ToString::to_string).unwrap_or_default();
        let long = self.get_long_help().map(|h| format!("{h}{shown}"));
        let arg = self.help(format!("{help}{shown}"));
        match long {
            Some(long) => arg.long_help(long),
            None => arg,
        }
    }
}

/// How clap spells a `ValueEnum` value (`auto`), for [`HelpDefault::help_default`].
pub fn enum_name<T: clap::ValueEnum>(value: &T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The long flag (`listen`) a setting is known by → `--listen`, `KUBEMEDIC_LISTEN`, `listen`.
pub fn env_of(long: &str) -> String {
    format!("KUBEMEDIC_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// The keys serde accepts for `T` (its field names), read from serde itself so the file's
/// unknown-key check and the declaration cannot disagree.
pub fn file_keys<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("probed"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::OWNERS;

    #[test]
    fn every_flag_has_its_variable_and_its_file_key_of_the_same_name() {
        let mut seen = std::collections::BTreeSet::new();
        for owner in OWNERS {
            let cmd = (owner.args)(clap::Command::new("x"));
            let mut longs: Vec<String> = Vec::new();
            for arg in cmd.get_arguments() {
                let long = arg
                    .get_long()
                    .unwrap_or_else(|| panic!("{} has no long flag", arg.get_id()));
                let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                assert_eq!(env, Some(env_of(long)), "--{long}'s variable");
                assert!(arg.get_help().is_some(), "--{long} has no description");
                assert!(seen.insert(long.to_owned()), "--{long} is declared twice");
                longs.push(long.to_owned());
            }
            let mut keys: Vec<String> = (owner.keys)().iter().map(|k| k.to_string()).collect();
            longs.sort();
            keys.sort();
            assert_eq!(longs, keys, "{}: flags and file keys", owner.title);
        }
    }

    #[test]
    fn the_help_shows_the_constant_default() {
        let arg = clap::Arg::new("x").help("Seconds").help_default(900);
        assert_eq!(
            arg.get_help().unwrap().to_string(),
            "Seconds [default: 900]"
        );
    }
}

// The names the kernel binary exports for every cell's copy of dryml to find with `dlsym`.
// Included by `dryml::protocol` and by the kernel's build script, so both spell them alike.
/// The interrupt flag SIGINT sets in evcxr's child.
pub const INTERRUPT_FLAG: &str = "dryml_interrupt_flag";
/// `dryml::batch`'s size table: look a key up.
pub const BATCH_GET: &str = "dryml_batch_get";
/// `dryml::batch`'s size table: record a size that worked.
pub const BATCH_RECORD: &str = "dryml_batch_record";
/// The child's start-up cell registers where the backtrace of a cell's last panic is read.
pub const BACKTRACE_TAKER: &str = "dryml_register_backtrace_taker";
/// The child's registry of comms and comm targets: register a handler.
pub const COMM_REGISTER: &str = "dryml_comm_register";
/// The child's registry of comms and comm targets: forget one.
pub const COMM_UNREGISTER: &str = "dryml_comm_unregister";
/// Set in evcxr's child once the frontend's widget manager has announced itself.
pub const WIDGETS_AVAILABLE: &str = "dryml_widgets_available";
/// Where an open experiment has every network write its TensorBoard run (`--tensorboard DIR`).
pub const TENSORBOARD_DIR: &str = "dryml_tensorboard_dir";
/// All of them, for the linker.
pub const EXPORTED: [&str; 8] = [
    INTERRUPT_FLAG,
    BATCH_GET,
    BATCH_RECORD,
    BACKTRACE_TAKER,
    COMM_REGISTER,
    COMM_UNREGISTER,
    WIDGETS_AVAILABLE,
    TENSORBOARD_DIR,
];

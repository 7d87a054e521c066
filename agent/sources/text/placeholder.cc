// Placeholder: removed when the real sources land.
namespace ad {}

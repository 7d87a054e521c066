// Placeholder until the lab lands.
namespace ad::lab {}

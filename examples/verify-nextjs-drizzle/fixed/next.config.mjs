// The route handler runs on Node (pg, the verify preload); nothing else to configure.
export default {};

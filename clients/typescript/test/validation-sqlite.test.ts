import { validateOn } from "./validation.js";

validateOn("sqlite");
